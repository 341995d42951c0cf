#!/usr/bin/env python3
"""Start a Kubernetes control plane on loopback for tests: etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, KWOK (simulated nodes and pod lifecycles), and the Kueue and JobSet controllers with
their webhooks, all built from pinned Go modules by ``build.py``.

From Python (pytest)::

    from testcluster.cluster import Cluster

    with Cluster() as c:                      # builds or reuses the binaries, starts everything, waits
        c.kubectl("get", "nodes")             # the built kubectl with the admin kubeconfig
        c.apply(objects)                      # server-side apply of dicts
        c.add_node(aks_node("aks-gpu-0", pool="gpu", gpus=1, taints=[GPU_TAINT]))
        print(c.kubeconfig)                   # admin kubeconfig path; c.server is https://127.0.0.1:<port>
    # everything stopped, working folder removed

From a shell: ``python3 testcluster/cluster.py up`` starts it and waits for Ctrl-C, printing the kubeconfig path.

Every port is picked at run time, so parallel runs do not collide. Every process runs in one process group that
``stop()`` ends, and each gets PR_SET_PDEATHSIG, so the kernel kills it when the Python process that started it
dies (start the cluster from the thread that lives as long as the cluster: the main thread, as pytest does).
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import ctypes
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

try:
    from . import build, pki
except ImportError:  # run as a script: python3 testcluster/cluster.py
    import build
    import pki

# What AKS enables (learn.microsoft.com/azure/aks/faq, "What Kubernetes admission controllers does AKS support?"),
# plus PodSecurity, on in AKS since 1.23 (learn.microsoft.com/azure/aks/use-psa). The API server's default-on
# plugins (Priority, RuntimeClass, TaintNodesByCondition, StorageObjectInUseProtection, the Certificate* ones,
# ValidatingAdmissionPolicy...) stay on too: --enable-admission-plugins adds to them.
AKS_ADMISSION_PLUGINS = (
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "DefaultIngressClass", "DefaultStorageClass",
    "DefaultTolerationSeconds", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota",
    "PodNodeSelector", "PodTolerationRestriction", "ExtendedResourceToleration", "PodSecurity",
)
SERVICE_CIDR, SERVICE_IP = "10.0.0.0/16", "10.0.0.1"  # AKS's default service CIDR
POD_CIDR, NODE_IP = "10.244.0.0/16", "10.224.0.4"  # AKS's default overlay pod CIDR, a node IP in its default subnet
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")  # nodes KWOK manages carry this annotation
KUEUE_NS, JOBSET_NS = "kueue-system", "jobset-system"
KUEUE_SERVICE, JOBSET_SERVICE = "kueue-webhook-service", "jobset-webhook-service"
KUEUE_SECRET = "kueue-webhook-server-cert"
# Kinds kept from the controllers' rendered config/default: the API and its webhooks, and the RBAC a Helm install
# also makes (aggregated user roles). Deployments, Services, Secrets, ConfigMaps and APIServices stay out: the
# controllers run here as processes, and an APIService without a backend breaks discovery.
KEEP_KINDS = {"Namespace", "CustomResourceDefinition", "MutatingWebhookConfiguration",
              "ValidatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
              "ServiceAccount"}
GPU_TAINT = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}


class StartupError(RuntimeError):
    pass


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int):
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def loopback_manifests(text: str, port: int, ca_pem: bytes) -> list[dict]:
    """The objects of a rendered config/default to apply, with every webhook (admission and CRD conversion)
    pointed at https://127.0.0.1:<port><its service path> and trusting ``ca_pem``, as envtest does
    (controller-runtime pkg/envtest/webhook.go and crd.go)."""
    ca = base64.b64encode(ca_pem).decode()

    def fix(cc: dict, default_path: str) -> None:
        svc = cc.pop("service", None)
        if svc is not None:
            cc["url"] = f"https://127.0.0.1:{port}{svc.get('path') or default_path}"
        cc["caBundle"] = ca

    out = []
    for d in yaml.safe_load_all(text):
        if not d or d.get("kind") not in KEEP_KINDS:
            continue
        if d["kind"].endswith("WebhookConfiguration"):
            (d["metadata"].get("annotations") or {}).pop("cert-manager.io/inject-ca-from", None)
            for w in d.get("webhooks") or []:
                fix(w["clientConfig"], "/")
        elif d["kind"] == "CustomResourceDefinition":
            (d["metadata"].get("annotations") or {}).pop("cert-manager.io/inject-ca-from", None)
            conv = d["spec"].get("conversion") or {}
            if conv.get("strategy") == "Webhook":
                fix(conv["webhook"]["clientConfig"], "/convert")
        out.append(d)
    return out


def aks_node(name: str, pool: str, *, cpu: str = "8", memory: str = "32Gi", pods: str = "110",
             gpus: int = 0, extended: dict | None = None, taints: list | None = None, labels: dict | None = None,
             instance_type: str = "Standard_NC24ads_A100_v4", zone: str = "0", mode: str = "user",
             kubelet_version: str | None = None) -> dict:
    """A Node as AKS registers one (labels from learn.microsoft.com/azure/aks/use-labels), for KWOK to run.
    ``status`` is sent on create, as a kubelet does; KWOK keeps capacity/allocatable and fills the rest."""
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    alloc.update(extended or {})
    node_labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "kubernetes.azure.com/agentpool": pool, "agentpool": pool, "kubernetes.azure.com/mode": mode,
        "kubernetes.azure.com/os-sku": "Ubuntu", "kubernetes.azure.com/cluster": "MC_rg_aks_eastus",
        "node.kubernetes.io/instance-type": instance_type, "beta.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/region": "eastus", "topology.kubernetes.io/zone": zone,
    }
    if gpus:
        node_labels["kubernetes.azure.com/accelerator"] = "nvidia"
    node_labels.update(labels or {})
    status = {"capacity": dict(alloc), "allocatable": alloc, "phase": "Running"}
    if kubelet_version:
        status["nodeInfo"] = {"kubeletVersion": kubelet_version}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": node_labels,
                     "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1], "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"taints": list(taints or []),
                 "providerID": f"azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
                               f"mc_rg_aks_eastus/providers/Microsoft.Compute/virtualMachineScaleSets/"
                               f"aks-{pool}-vmss/virtualMachines/{name.rsplit('-', 1)[-1]}"},
        "status": status,
    }


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class Cluster:
    """One control plane on loopback. ``start()`` (or ``with``) brings it up; ``stop()`` ends it.

    workdir: folder for certs, configs, etcd data and logs (default: a new temporary folder, removed on stop
        unless ``keep`` or $TESTCLUSTER_KEEP is set).
    kueue_config: a Kueue Configuration (e.g. the project's chart config) merged under the fields this harness
        must own (namespace, health/webhook addresses, certs, leader election).
    admission_config: an AdmissionConfiguration dict for --admission-control-config-file (default none, as AKS:
        no cluster-wide Pod Security defaults).
    """

    def __init__(self, workdir: str | os.PathLike | None = None, *, keep: bool | None = None,
                 kueue_config: dict | None = None, jobset_config: dict | None = None,
                 admission_config: dict | None = None, layout: build.Layout | None = None, log=None,
                 start_timeout: float = 180.0):
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self.keep = bool(os.environ.get("TESTCLUSTER_KEEP")) if keep is None else keep
        self.kueue_config, self.jobset_config = kueue_config or {}, jobset_config or {}
        self.admission_config = admission_config
        self.layout = layout
        self.log = log or (lambda msg: print(f"[testcluster] {msg}", file=sys.stderr, flush=True))
        self.start_timeout = start_timeout
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self._keeper: subprocess.Popen | None = None
        self._t0 = self._deadline = 0.0

    # ---- public ---------------------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def env(self) -> dict:
        """Environment for a subprocess that should talk to this cluster (KUBECONFIG set)."""
        return dict(os.environ, KUBECONFIG=str(self.kubeconfig))

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.layout.bin["kubectl"]), f"--kubeconfig={self.kubeconfig}", *args]
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise subprocess.CalledProcessError(p.returncode, cmd, p.stdout, p.stderr)
        return p

    def apply(self, objects, *, field_manager: str = "testcluster", check: bool = True):
        """Server-side apply of dicts (one or a list), as kubectl apply --server-side."""
        if isinstance(objects, dict):
            objects = [objects]
        text = yaml.safe_dump_all(list(objects), sort_keys=False)
        return self.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={field_manager}",
                            "-f", "-", input=text, check=check)

    def add_node(self, node: dict, ready_timeout: float = 60) -> None:
        """Create a Node with its status (as a kubelet registers) and wait until KWOK reports it Ready."""
        self.kubectl("create", "-f", "-", input=json.dumps(node))
        if KWOK_ANNOTATION[0] in node["metadata"].get("annotations", {}):
            self.kubectl("wait", "--for=condition=Ready", f"node/{node['metadata']['name']}",
                         f"--timeout={int(ready_timeout)}s", timeout=ready_timeout + 10)

    def wait_for_default_sa(self, namespace: str, timeout: float = 60) -> None:
        """The ServiceAccount admission plugin refuses pods until KCM has made sa/default: wait for it."""
        deadline = time.monotonic() + timeout
        while self.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no sa/default in {namespace} after {timeout}s")
            time.sleep(0.2)

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Cluster:
        self._t0 = time.monotonic()
        if self.layout is None:
            self.layout = build.ensure_built(log=self.log)
        self._mark("build")
        self._deadline = time.monotonic() + self.start_timeout  # the build, if any, does not count
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="testcluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.stop(remove=False)
            raise
        self.timings["total"] = round(time.monotonic() - self._t0, 2)
        self.log(f"cluster up in {self.timings['total']}s ({self.server}); KUBECONFIG={self.kubeconfig}")
        return self

    def stop(self, remove: bool | None = None) -> None:
        """SIGTERM every component (controllers first, etcd last), SIGKILL the process group after 10 s."""
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        if self._keeper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._keeper.pid, signal.SIGKILL)
            self._keeper.wait()
            self._keeper = None
        for p in self.procs.values():
            p.wait()
        self.procs.clear()
        remove = (self._own_workdir and not self.keep) if remove is None else remove
        if remove and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- start-up -------------------------------------------------------------------------------------------
    def _mark(self, phase: str) -> None:
        self.timings[phase] = round(time.monotonic() - self._t0, 2)

    def _start(self) -> None:
        w, b = self.workdir, self.layout.bin
        names = ["etcd", "etcd_peer", "apiserver", "kcm", "scheduler", "kwok", "kueue_webhook", "kueue_health",
                 "jobset_webhook", "jobset_health"]
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        p = pki.make(w / "pki", SERVICE_IP, f"{KUEUE_SERVICE}.{KUEUE_NS}.svc", f"{JOBSET_SERVICE}.{JOBSET_NS}.svc")
        self._mark("pki")
        for name, user in (("admin", "admin"), ("kcm", "kcm"), ("scheduler", "scheduler")):
            self._kubeconfig(w / f"{name}.kubeconfig", p, user)
        # One process group for everything, led by a process that only waits (so the group outlives any member).
        self._keeper = subprocess.Popen(["sleep", "infinity"], process_group=0,
                                        preexec_fn=functools.partial(_die_with_parent, os.getpid()))

        etcd = self.ports["etcd"]
        self._spawn("etcd", [
            b["etcd"], "--name=default", f"--data-dir={w / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd}", f"--advertise-client-urls=http://127.0.0.1:{etcd}",
            f"--listen-peer-urls=http://127.0.0.1:{self.ports['etcd_peer']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{self.ports['etcd_peer']}",
            f"--initial-cluster=default=http://127.0.0.1:{self.ports['etcd_peer']}",
            "--unsafe-no-fsync", "--log-level=warn"])
        self._wait("etcd", f"http://127.0.0.1:{etcd}/health", lambda body: '"health":"true"' in body)

        apiserver = [
            b["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{etcd}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}", "--authorization-mode=Node,RBAC",
            f"--enable-admission-plugins={','.join(AKS_ADMISSION_PLUGINS)}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--endpoint-reconciler-type=none",  # no kubelets, and a loopback IP may not be an endpoint
            "--profiling=false"]
        if self.admission_config:
            (w / "admission.yaml").write_text(yaml.safe_dump(self.admission_config))
            apiserver.append(f"--admission-control-config-file={w / 'admission.yaml'}")
        self._spawn("kube-apiserver", apiserver)
        self._wait("kube-apiserver", f"{self.server}/readyz", lambda body: body.strip() == "ok", client=True)

        kcm, sch = w / "kcm.kubeconfig", w / "scheduler.kubeconfig"
        self._spawn("kube-controller-manager", [
            b["kube-controller-manager"], f"--kubeconfig={kcm}", f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}", "--bind-address=127.0.0.1", f"--secure-port={self.ports['kcm']}",
            "--leader-elect=false", f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}", "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={p / 'ca.crt'}", f"--cluster-signing-key-file={p / 'ca.key'}",
            "--profiling=false"])
        self._spawn("kube-scheduler", [
            b["kube-scheduler"], f"--kubeconfig={sch}", f"--authentication-kubeconfig={sch}",
            f"--authorization-kubeconfig={sch}", "--bind-address=127.0.0.1", f"--secure-port={self.ports['scheduler']}",
            "--leader-elect=false", "--profiling=false"])
        kwok_home = w / "kwok-home"  # kwok also reads ~/.kwok/kwok.yaml: give it an empty home
        kwok_home.mkdir(exist_ok=True)
        self._spawn("kwok", [
            b["kwok"], f"--kubeconfig={w / 'admin.kubeconfig'}", f"--config={self.layout.kwok_stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION[0]}={KWOK_ANNOTATION[1]}",
            f"--cidr={POD_CIDR}", f"--node-ip={NODE_IP}", "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{self.ports['kwok']}"], env={"HOME": str(kwok_home)})

        # The controllers' API, RBAC and loopback webhooks; then their processes.
        ca = (p / "webhook-ca.crt").read_bytes()
        objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (KUEUE_NS, JOBSET_NS)]
        objs += loopback_manifests(self.layout.kueue_manifests.read_text(), self.ports["kueue_webhook"], ca)
        objs += loopback_manifests(self.layout.jobset_manifests.read_text(), self.ports["jobset_webhook"], ca)
        self._apply_retry(objs)
        self._secret(KUEUE_NS, KUEUE_SECRET, {"ca.crt": p / "webhook-ca.crt", "ca.key": p / "webhook-ca.key",
                                              "tls.crt": p / "kueue-webhook.crt", "tls.key": p / "kueue-webhook.key"})
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self._mark("crds")
        self._start_kueue()
        self._start_jobset()

        self._wait("kube-controller-manager", f"https://127.0.0.1:{self.ports['kcm']}/healthz", _ok)
        self._wait("kube-scheduler", f"https://127.0.0.1:{self.ports['scheduler']}/healthz", _ok)
        self._wait("kwok", f"http://127.0.0.1:{self.ports['kwok']}/healthz", _ok)
        self._wait("kueue", f"http://127.0.0.1:{self.ports['kueue_health']}/readyz", _ok)
        self._wait("jobset", f"http://127.0.0.1:{self.ports['jobset_health']}/readyz", _ok)
        self.wait_for_default_sa("default", timeout=self._left())  # KCM's serviceaccount controller works
        self.check()

    def check(self) -> None:
        """Raise StartupError if any component has exited (a controller can fail after it reported ready)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise StartupError(f"{name} exited with {proc.returncode}:\n{self._tail(name)}")

    def _start_kueue(self) -> None:
        w, p = self.workdir, self.workdir / "pki"
        certs = w / "kueue-certs"  # the Secret's files, where a kubelet would mount them (the rotator waits for them)
        certs.mkdir(exist_ok=True)
        for name, src in (("tls.crt", "kueue-webhook.crt"), ("tls.key", "kueue-webhook.key"),
                          ("ca.crt", "webhook-ca.crt")):
            shutil.copy(p / src, certs / name)
        cfg = _deep_merge({"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}},
                          self.kueue_config)
        cfg = _deep_merge(cfg, {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": KUEUE_NS,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue_health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.ports["kueue_webhook"], "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            # Internal cert management stays on (Kueue's default; off, it insists on /etc/kueue/metrics/certs):
            # its rotator finds our CA and serving cert valid in the Secret, keeps them, injects our CA, and waits
            # for the files in certDir.
            "internalCertManagement": {"enable": True, "webhookServiceName": KUEUE_SERVICE,
                                       "webhookSecretName": KUEUE_SECRET},
            # The visibility API server (beta, on by default since 0.9) delegates authentication through the
            # in-cluster config (KUBERNETES_SERVICE_HOST and a mounted token); outside a pod Kueue exits with
            # "unable to load in-cluster configuration". Its APIService is not applied either (KEEP_KINDS).
            "featureGates": {"VisibilityOnDemand": False},
        })
        (w / "kueue-config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        self._spawn("kueue", [self.layout.bin["kueue"], f"--config={w / 'kueue-config.yaml'}"],
                    env={"KUBECONFIG": str(w / "admin.kubeconfig")})

    def _start_jobset(self) -> None:
        w, p = self.workdir, self.workdir / "pki"
        certs = w / "jobset-certs"
        certs.mkdir(exist_ok=True)
        shutil.copy(p / "jobset-webhook.crt", certs / "tls.crt")
        shutil.copy(p / "jobset-webhook.key", certs / "tls.key")
        cfg = _deep_merge(self.jobset_config, {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['jobset_health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.ports["jobset_webhook"], "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        })
        (w / "jobset-config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        self._spawn("jobset", [self.layout.bin["jobset"], f"--config={w / 'jobset-config.yaml'}"],
                    env={"KUBECONFIG": str(w / "admin.kubeconfig")})

    def _kubeconfig(self, path: Path, p: Path, user: str) -> None:
        b64 = lambda f: base64.b64encode((p / f).read_bytes()).decode()  # noqa: E731
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "testcluster",
               "clusters": [{"name": "testcluster", "cluster": {
                   "server": self.server, "certificate-authority-data": b64("ca.crt")}}],
               "users": [{"name": user, "user": {"client-certificate-data": b64(f"{user}.crt"),
                                                 "client-key-data": b64(f"{user}.key")}}],
               "contexts": [{"name": "testcluster", "context": {"cluster": "testcluster", "user": user}}]}
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)

    def _secret(self, namespace: str, name: str, files: dict) -> None:
        data = {k: base64.b64encode(Path(f).read_bytes()).decode() for k, f in files.items()}
        self.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                    "type": "Opaque", "data": data})

    def _apply_retry(self, objs: list[dict]) -> None:
        """Apply; retry while the API server is still installing its built-in RBAC and the new CRDs."""
        deadline = time.monotonic() + 60
        while True:
            p = self.apply(objs, check=False)
            if p.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise StartupError(f"applying the controllers' manifests failed:\n{p.stderr[-3000:]}")
            time.sleep(1)

    def _spawn(self, name: str, argv: list, env: dict | None = None) -> None:
        logf = open(self.workdir / "logs" / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(
            [str(a) for a in argv], stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, **(env or {})), process_group=self._keeper.pid,
            preexec_fn=functools.partial(_die_with_parent, os.getpid()))
        logf.close()

    def _left(self) -> float:
        return max(1.0, self._deadline - time.monotonic())

    def _wait(self, name: str, url: str, ok, client: bool = False) -> None:
        ctx = ssl.create_default_context(cafile=str(self.workdir / "pki" / "ca.crt")) if client else \
            ssl._create_unverified_context()
        if client:
            p = self.workdir / "pki"
            ctx.load_cert_chain(p / "admin.crt", p / "admin.key")
        deadline, last = time.monotonic() + self._left(), ""
        while True:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise StartupError(f"{name} exited with {proc.returncode}:\n{self._tail(name)}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx if url.startswith("https") else None) as r:
                    body = r.read().decode(errors="replace")
                    if ok(body):
                        self._mark(name)
                        return
                    last = body[-500:]
            except Exception as e:  # noqa: BLE001 - not up yet
                last = repr(e)
            if time.monotonic() > deadline:
                raise StartupError(f"{name} not healthy at {url} after {self.start_timeout}s ({last}):\n"
                                   f"{self._tail(name)}")
            time.sleep(0.2)

    def _tail(self, name: str, lines: int = 40) -> str:
        f = self.workdir / "logs" / f"{name}.log"
        return "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) if f.exists() else ""


def _ok(body: str) -> bool:
    return body.strip() == "ok"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Start the test cluster on loopback and wait for Ctrl-C.")
    ap.add_argument("command", choices=["up"], nargs="?", default="up")
    ap.add_argument("--workdir", help="keep certs, configs and logs here (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="do not remove the working folder on stop")
    args = ap.parse_args(argv)
    c = Cluster(args.workdir, keep=args.keep)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with c:
        print(json.dumps({"kubeconfig": str(c.kubeconfig), "server": c.server, "timings": c.timings,
                          "versions": c.layout.versions}, indent=2), flush=True)
        print(f"export KUBECONFIG={c.kubeconfig}   # Ctrl-C stops the cluster", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Checks against the cluster's API server before any Kubernetes resource is touched, so that `pulumi up` stops
at once with one line saying what to do instead of failing or timing out per resource:

- ``require_reachable``: a private API server resolves and answers from this machine;
- ``wait_for_access``: the deployer's Azure RBAC role has taken effect. A new role assignment "can take up to
  five minutes to propagate" (AKS, entra-id-authorization); the first `pulumi up` would otherwise get 403 on its
  first namespaces and Helm releases and need a rerun. A preview asks only to read: it writes nothing in the
  cluster, and pulumi-kubernetes previews what it may not dry-run on the server by its own client-side diff;
- ``wait_for_crds``: the AKS add-ons (managed Prometheus, KEDA) have registered the custom resource kinds the
  program writes. The add-ons install them after the cluster reports success; an object written before gets
  "no matches for kind" and the first `pulumi up` fails. Not in a preview, which writes no object (and whose
  identity may not read CustomResourceDefinitions).

Each wait counts an answer a moment may cure (a timeout, a refused connection, a 429 or a 5xx from an API server
that has just been created) as "not yet". The calls are urllib with the kubeconfig read here, for every user kind
AKS hands out (an exec plugin, or a client certificate with a static token), rather than the `kubernetes` client:
two calls during `pulumi up` do not warrant the 16 packages it adds to the runtime (kubernetes 37.0.2 with
aiohttp, requests-oauthlib, websocket-client and theirs), and which errors count as "not yet" is this module's
decision with any client (docs/development.md).
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pulumi
import yaml

HINT = ("run `pulumi up` where the VNet is reachable: a VM or self-hosted runner in the cluster's VNet, or in a "
        "peered VNet linked to the cluster's private DNS zone (docs/deploying.md: Private clusters)")
ACCESS_TIMEOUT_SECONDS = 600
"""Twice the five minutes AKS documents for a role assignment to propagate."""
ACCESS_POLL_SECONDS = 15
DEPLOY_ACCESS = {"verb": "*", "group": "*", "resource": "*"}
"""May I do everything? What `pulumi up` needs: namespaces, CRDs, cluster-scoped rules, Helm releases."""
PREVIEW_ACCESS = {"verb": "list", "group": "", "resource": "namespaces"}
"""May I read? What `pulumi preview` needs. A preview writes nothing in the cluster: pulumi-kubernetes previews a
create or update by server-side dry run, which Kubernetes authorizes as the write itself, and where that is
Forbidden by a client-side diff of the inputs (pulumi-kubernetes provider/pkg/provider/provider.go, Create and
Update: "defaulting to client-side"). Azure Kubernetes Service RBAC Reader, the workflows' preview app's role,
allows it (Microsoft.ContainerService/managedClusters/namespaces/read)."""


def access_review(attributes: Mapping[str, str]) -> dict[str, Any]:
    """A SelfSubjectAccessReview of ``attributes`` (authorization.k8s.io/v1)."""
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": dict(attributes)}}
T = TypeVar("T")


def api_server_problem(host: str, port: int = 443, timeout: float = 5.0) -> str | None:
    """Why ``host:port`` cannot be reached from here, or None when a TCP connection opens."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return f"{host} does not resolve here; a private cluster's name exists only in its VNet's private DNS zone"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return f"{host}:{port} resolves but does not answer ({error})"


def _current(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(cluster, user) of the kubeconfig's current context, as kubectl picks them; the first of each where it names
    none (AKS writes one cluster, one user and one context)."""
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    context = contexts.get(config.get("current-context") or "") or next(iter(contexts.values()), {})
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or []}
    cluster = clusters.get(context.get("cluster") or "") or next(iter(clusters.values()), {})
    user = users.get(context.get("user") or "") or next(iter(users.values()), {})
    return cluster, user


def _cluster(kubeconfig: str) -> dict[str, Any]:
    return _current(yaml.safe_load(kubeconfig))[0]


def server_of(kubeconfig: str) -> tuple[str, int]:
    """Host and port of the API server of the kubeconfig's current context."""
    url = urlparse(_cluster(kubeconfig)["server"])
    return url.hostname or "", url.port or 443


def require_reachable(kubeconfig: str) -> str:
    """The kubeconfig unchanged, or a one-line error naming the problem and the fix."""
    problem = api_server_problem(*server_of(kubeconfig))
    if problem:
        raise pulumi.RunError(f"private AKS API server unreachable from this machine: {problem}; {HINT}")
    return kubeconfig


@dataclass(frozen=True)
class Credentials:
    """How this machine talks to the API server of the kubeconfig's current context."""

    server: str
    """The API server's URL."""
    ca_pem: str | None = None
    """The cluster CA to trust (PEM); None trusts the system's CAs."""
    token: str | None = None
    """A bearer token: from kubelogin (Entra ID), or the static token of an AKS local-account kubeconfig."""
    client_cert: tuple[str, str] | None = None
    """(certificate, key) in PEM for TLS client authentication: the AKS admin kubeconfig (cluster.localAccounts)."""
    entra: bool = False
    """The token comes from an exec plugin (kubelogin): Azure RBAC decides what it may do, and a fresh role
    assignment takes minutes to reach the cluster."""


def _pem(user: Mapping[str, Any], name: str) -> str | None:
    """A kubeconfig credential given inline (``name``-data, base64, which wins) or as a file (``name``)."""
    if data := user.get(f"{name}-data"):
        return base64.b64decode(data).decode()
    if path := user.get(name):
        return Path(path).expanduser().read_text()
    return None


def _exec_plugin(plugin: Mapping[str, Any]) -> dict[str, Any]:
    """The ExecCredential ``status`` the plugin prints (client.authentication.k8s.io)."""
    env = {**os.environ, **{e["name"]: e["value"] for e in plugin.get("env") or []}}
    try:
        result = subprocess.run([plugin["command"], *(plugin.get("args") or [])], capture_output=True, text=True,
                                env=env, timeout=120, check=False)
    except FileNotFoundError:
        raise pulumi.RunError(f"{plugin['command']} not found: {plugin.get('installHint') or 'install it'}") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise pulumi.RunError(f"{plugin['command']} could not get a token for the cluster: {last}")
    return json.loads(result.stdout)["status"]


def credentials(kubeconfig: str) -> Credentials:
    """The current context's server, CA and user credentials, for each kind of user AKS hands out: an exec plugin
    (the Entra ID user kubeconfig, rewritten for kubelogin), and a client certificate with a static token (the
    admin kubeconfig of a cluster with local accounts). Fields as client-go reads them (clientcmd/api/v1 AuthInfo):
    ``token`` before ``tokenFile``, ``client-certificate-data`` before ``client-certificate``."""
    cluster, user = _current(yaml.safe_load(kubeconfig))
    common = {"server": cluster["server"].rstrip("/"), "ca_pem": _pem(cluster, "certificate-authority")}
    if plugin := user.get("exec"):
        status = _exec_plugin(plugin)
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        return Credentials(**common, token=status.get("token"), entra=True,
                           client_cert=(cert, key) if cert and key else None)
    if unsupported := sorted(k for k in ("auth-provider", "username", "password") if user.get(k)):
        raise pulumi.RunError(f"the kubeconfig's user authenticates with {', '.join(unsupported)}, which the preflight "
                              "does not support: use the AKS credentials (kubelogin exec, or the admin certificate)")
    token = user.get("token") or (Path(user["tokenFile"]).read_text().strip() if user.get("tokenFile") else None)
    cert, key = _pem(user, "client-certificate"), _pem(user, "client-key")
    return Credentials(**common, token=token, client_cert=(cert, key) if cert and key else None)


def _tls(credentials: Credentials) -> ssl.SSLContext:
    """Trust the cluster CA; present the client certificate where there is one. ``load_cert_chain`` reads only
    files: they live in a private temporary folder for the one call."""
    context = ssl.create_default_context(cadata=credentials.ca_pem)
    if credentials.client_cert:
        with tempfile.TemporaryDirectory() as folder:  # mode 0700 (tempfile.mkdtemp)
            cert, key = Path(folder, "client.crt"), Path(folder, "client.key")
            cert.write_text(credentials.client_cert[0])
            key.write_text(credentials.client_cert[1])
            try:
                context.load_cert_chain(cert, key)
            except ssl.SSLError as error:  # a local file problem: no retry mends it
                raise pulumi.RunError(f"the kubeconfig's client certificate and key do not load: {error}") from None
    return context


def _call(credentials: Credentials, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One API call as ``credentials``: a POST of ``body``, else a GET. Raises ``urllib.error.HTTPError`` on an error
    status, ``urllib.error.URLError`` where no answer came."""
    headers = {"Accept": "application/json"}
    if credentials.token:
        headers["Authorization"] = f"Bearer {credentials.token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(f"{credentials.server}{path}", headers=headers,  # noqa: S310 (the kubeconfig's API server)
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
    context = _tls(credentials) if credentials.server.startswith("https:") else None
    with urllib.request.urlopen(request, context=context, timeout=CALL_TIMEOUT_SECONDS) as response:  # noqa: S310 (the same request)
        return json.loads(response.read())


CALL_TIMEOUT_SECONDS = 30
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
"""Answers a moment may cure: throttling (429) and a busy or restarting API server (5xx); the set the GPU node
controllers' client retries too (components/gpu/kube_api.py)."""


_CERTIFICATE_ALERT = re.compile(r"CERTIFICATE|UNKNOWN_CA")
"""OpenSSL's reasons for a TLS alert refusing our client certificate (TLSV13_ALERT_CERTIFICATE_REQUIRED,
SSLV3_ALERT_BAD_CERTIFICATE, SSLV3_ALERT_CERTIFICATE_EXPIRED, TLSV1_ALERT_UNKNOWN_CA, ...)."""


def transient(error: BaseException) -> bool:
    """Whether ``error`` is one a freshly created API server gives while it settles: a status in
    ``TRANSIENT_STATUS``, a refused or reset connection, a timeout, a name that does not resolve yet, a connection
    closed mid-handshake (``SSLEOFError``: a server or load balancer still starting). A certificate that does not
    verify (wrong CA) or a client certificate the server refuses is not: waiting does not change it."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in TRANSIENT_STATUS
    if isinstance(error, urllib.error.URLError):
        error = error.reason if isinstance(error.reason, BaseException) else error
    if isinstance(error, ssl.SSLCertVerificationError):
        return False
    if isinstance(error, ssl.SSLError):
        return not _CERTIFICATE_ALERT.search(str(error.reason or ""))
    return isinstance(error, OSError)


def _why(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    return f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)


def _ask(question: Callable[[], T], what: str) -> tuple[T | None, str | None]:
    """``question()``'s answer, or (None, why) where the API server gave none for a reason a moment may cure; one
    line naming ``what`` was asked where it failed for good."""
    try:
        return question(), None
    except (urllib.error.URLError, OSError) as error:
        if transient(error):
            return None, _why(error)
        raise pulumi.RunError(f"the AKS API server refused {what}: {_why(error)}") from None


def may(credentials: Credentials, attributes: Mapping[str, str] = DEPLOY_ACCESS) -> bool:
    """Whether the API server answers a SelfSubjectAccessReview of ``attributes`` with allowed (401 and 403: not
    yet)."""
    try:
        review = _call(credentials, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                       access_review(attributes))
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            return False
        raise
    return bool(review["status"].get("allowed"))


CRD_TIMEOUT_SECONDS = 600
"""Add-ons deploy within minutes of the cluster; ten minutes is generous."""


def crd_established(credentials: Credentials, name: str) -> bool:
    """Whether the API server serves the CustomResourceDefinition ``name`` (condition Established)."""
    try:
        crd = _call(credentials, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_for_crds(kubeconfig: str, names: Sequence[str], timeout: float = CRD_TIMEOUT_SECONDS,
                  interval: float = ACCESS_POLL_SECONDS, login: Callable[[str], Credentials] = credentials,
                  established: Callable[[Credentials, str], bool] = crd_established,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """The kubeconfig unchanged once every CRD in ``names`` is served; one line naming the missing ones after
    ``timeout`` seconds. A transient error (``transient``) counts as "not yet"."""
    if not names:
        return kubeconfig
    user = login(kubeconfig)
    deadline = clock() + timeout
    missing = list(names)

    def still_missing(pending: list[str]) -> list[str]:
        return [n for n in pending if not established(user, n)]

    while True:
        answer, problem = _ask(partial(still_missing, missing),
                               f"a read of CustomResourceDefinitions {', '.join(missing)}")
        missing = missing if answer is None else answer
        if not missing:
            return kubeconfig
        if clock() >= deadline:
            raise pulumi.RunError(
                f"the cluster still does not serve {', '.join(missing)} after {timeout:.0f}s: "
                + (f"its API server does not answer ({problem})" if problem else
                   "the AKS add-on that installs it (managed Prometheus for azmonitoring.coreos.com, KEDA for "
                   "keda.sh) is not running; check `az aks show --query '[azureMonitorProfile, "
                   "workloadAutoScalerProfile]'` and kube-system pods"))
        pulumi.log.info(f"waiting for the AKS add-ons to register {', '.join(missing)}"
                        + (f" (the API server: {problem})" if problem else ""))
        sleep(interval)


def wait_for_access(kubeconfig: str, preview: bool = False, timeout: float = ACCESS_TIMEOUT_SECONDS,
                    interval: float = ACCESS_POLL_SECONDS, login: Callable[[str], Credentials] = credentials,
                    allowed: Callable[[Credentials, Mapping[str, str]], bool] = may,
                    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> str:
    """The kubeconfig unchanged once its identity may do what the run needs: manage every Kubernetes object for
    `pulumi up`, read them for a preview (``preview``, ``pulumi.runtime.is_dry_run()``: ``PREVIEW_ACCESS`` says
    why reading is all a preview needs). Polls while a fresh role assignment propagates, and stops with one line
    after ``timeout`` seconds. A transient error counts as "not yet"."""
    user = login(kubeconfig)
    if not user.entra:
        return kubeconfig  # a local account (certificate, static token): no Azure RBAC to wait for
    attributes = PREVIEW_ACCESS if preview else DEPLOY_ACCESS
    deadline = clock() + timeout
    while True:
        answer, problem = _ask(lambda: allowed(user, attributes), "the access review (SelfSubjectAccessReview)")
        if answer:
            return kubeconfig
        if clock() >= deadline:
            if preview:
                raise pulumi.RunError(
                    f"the identity running pulumi preview still may not read Kubernetes objects after "
                    f"{timeout:.0f}s: give it Azure Kubernetes Service RBAC Reader on the cluster (the workflows' "
                    "preview app gets it from python -m ops ci-setup), or preview as the deployer")
            raise pulumi.RunError(
                f"the AKS API server still does not answer after {timeout:.0f}s ({problem})" if problem else
                f"the identity running pulumi up still may not manage Kubernetes objects after {timeout:.0f}s: keep "
                "cluster.grantDeployerAdmin on (AKS RBAC Cluster Admin), or add the identity to a group in "
                "cluster.adminGroupObjectIds, and check cluster.deployerPrincipalType")
        pulumi.log.info(f"waiting for the API server to answer ({problem})" if problem else
                        "waiting for the Kubernetes role assignment to take effect (up to 5 minutes, AKS docs)")
        sleep(interval)

"""Kueue queues the GPU Jobs of scenarios that need a queue within what their pools hold at their maximum size, so
a batch larger than the pools waits instead of pending pods forever."""

from __future__ import annotations

import json

import yaml

from components.autoscaling.kueue import manager_config
from offline.report import helm_release, manifest
from tests import upstream
from tests.helpers import QUEUE_LABEL, gpu_jobs, render_with

KUEUE = "0.19.2"
KINDS = {"ResourceFlavor": "resourceflavors.kueue.x-k8s.io", "ClusterQueue": "clusterqueues.kueue.x-k8s.io",
         "LocalQueue": "localqueues.kueue.x-k8s.io"}


def queued(renders) -> list:
    """The renders whose scenario queues its GPU Jobs (``Needs.job_queue``) with Kueue on."""
    found = [r for r in renders.values() if r.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")]
    assert found
    return found


def kueue_objects(render, kind: str) -> list[dict]:
    return [manifest(r) for r in render.resources
            if r.type == f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}"]


def test_kueues_objects_fit_the_pinned_crds(renders):
    for r in queued(renders):
        for kind, crd in KINDS.items():
            found = kueue_objects(r, kind)
            assert found, (r.stack, kind)
            for obj in found:
                upstream.validate_against_crd(obj, upstream.operator_crd("kueue", KUEUE, crd))


def test_the_cluster_queue_holds_what_each_gpu_pool_holds_at_its_maximum_size():
    r = render_with("queued", scenario="training-autoscale", storage={"accounts": [{"role": "ckpt"}]},
                    cpuPools=[{"name": "cpu"}], gpuPools=[
                        {"name": "t4", "maxCount": 5, "sharing": {"mode": "time-slicing", "replicas": 2}},
                        {"name": "a100", "vmSize": "Standard_NC48ads_A100_v4", "maxCount": 2}])
    (queue,) = kueue_objects(r, "ClusterQueue")
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    # 5 NC4as_T4_v3 (4 vCPUs, 28 GiB, one T4 time-sliced in 2) and 2 NC48ads_A100_v4 (48 vCPUs, 440 GiB, 2 A100s),
    # each node counted as what it leaves pods (round-3 k8s item 8: the VM size admitted Jobs that then stayed
    # Pending). A T4 node: 4000m - 140m kube-reserved - 455m of DaemonSets; 28672Mi - (20 x 110 + 50) - 100 - 914.
    assert {f["name"]: {q["name"]: q["nominalQuota"] for q in f["resources"]} for f in group["flavors"]} == {
        "t4": {"cpu": f"{5 * 3405}m", "memory": f"{5 * 25408}Mi", "nvidia.com/gpu": "10"},
        "a100": {"cpu": f"{2 * 46805}m", "memory": f"{2 * 447296}Mi", "nvidia.com/gpu": "4"}}
    # A batch that does not fit must not hold back smaller Jobs queued after it.
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_each_flavor_is_its_pool_labels_and_taints(renders):
    for r in queued(renders):
        pools = {p.inputs["agentPoolName"]: p.inputs for p in r.of_type("azure-native:containerservice:AgentPool")}
        for flavor in kueue_objects(r, "ResourceFlavor"):
            pool = pools[flavor["metadata"]["name"]]
            assert flavor["spec"]["nodeLabels"] == {"kubernetes.azure.com/agentpool": pool["agentPoolName"]}
            taints = {f"{t['key']}={t['value']}:{t['effect']}" for t in flavor["spec"]["nodeTaints"]}
            assert taints == set(pool.get("nodeTaints", []))


def test_every_gpu_job_is_queued_and_admissible_to_its_pools_flavor(renders):
    """Kueue gives a Job a flavor only when its pods select the flavor's labels and tolerate its taints, and
    refuses resources the ClusterQueue does not cover: a Job failing either would wait forever."""
    for r in queued(renders):
        admissible(r)


def admissible(r) -> None:
    (local,) = kueue_objects(r, "LocalQueue")
    (queue,) = kueue_objects(r, "ClusterQueue")
    covered = set(queue["spec"]["resourceGroups"][0]["coveredResources"])
    flavors = {f["metadata"]["name"]: f["spec"] for f in kueue_objects(r, "ResourceFlavor")}
    jobs = gpu_jobs(r)
    assert jobs
    for name, (meta, spec) in jobs.items():
        assert meta["labels"][QUEUE_LABEL] == local["metadata"]["name"], name
        assert meta["namespace"] == local["metadata"]["namespace"], name
        pod = spec["template"]["spec"]
        # The queue is the Job's: on a pod template Kueue would manage each pod on its own.
        assert QUEUE_LABEL not in spec["template"]["metadata"].get("labels", {}), name
        fitting = [f for f, s in flavors.items()
                   if s["nodeLabels"].items() <= pod["nodeSelector"].items()
                   and all(any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"]
                               and t.get("value", taint["value"]) == taint["value"]
                               for t in pod.get("tolerations", []))
                           for taint in s["nodeTaints"])]
        assert len(fitting) == 1, (name, fitting)
        for c in pod["containers"] + pod.get("initContainers", []):
            assert set(c["resources"]["requests"]) | set(c["resources"]["limits"]) <= covered, (name, c["name"])


def test_kueue_manages_only_jobs_and_only_in_the_queued_namespace(render_shape):
    r = render_shape("training")
    release = helm_release(r.named("kueue-release"))
    assert release["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and release["version"] == KUEUE
    image = release["values"]["controllerManager"]["manager"]["image"]
    assert (image["repository"], image["tag"]) == ("registry.k8s.io/kueue/kueue", f"v{KUEUE}")
    config = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["integrations"] == {"frameworks": ["batch/job"]}
    (local,) = kueue_objects(r, "LocalQueue")
    namespaces = [local["metadata"]["namespace"]]
    (selector,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
    assert selector == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
    (queue,) = kueue_objects(r, "ClusterQueue")
    assert queue["spec"]["namespaceSelector"]["matchExpressions"] == [selector]


def test_the_manager_config_is_the_charts_but_for_what_it_manages():
    """Replacing the chart's config string must not drop its ports, leader election or rate limits."""
    chart = yaml.safe_load(upstream.chart_values("kueue")["managerConfig"]["controllerManagerConfigYaml"])
    ours = manager_config(["training"])
    changed = {"integrations", "managedJobsNamespaceSelector"}
    assert {k: v for k, v in ours.items() if k not in changed} == {k: v for k, v in chart.items() if k not in changed}
    assert set(chart["integrations"]["frameworks"]) >= {"batch/job", "pod", "deployment", "statefulset"}


def test_kueues_objects_wait_for_the_release_that_defines_their_kinds(renders):
    for r in queued(renders):
        for obj in [x for x in r.resources if x.type.startswith("kubernetes:kueue.x-k8s.io/")]:
            # The ClusterQueue also waits for its flavors, the LocalQueue for the ClusterQueue (and so the release).
            assert "kueue-release" in obj.depends_on or "kueue-cluster-queue" in obj.depends_on, obj.name


def test_everything_kueue_manages_goes_before_kueue_on_destroy(renders):
    """Round-3 k8s audit #4: Kueue creates each Workload with its finalizer and only its controller removes it
    (kueue v0.19.2 pkg/controller/jobframework/utils.go:273, reconciler.go:440-460); the chart ships its CRDs as
    templates, so uninstalling it first left Workloads, and their namespace, Terminating. Pulumi deletes a resource
    after everything that depends on it."""
    queued_stacks = [r for r in renders.values() if r.of_type("kubernetes:helm.sh/v3:Release")
                     and any(x.name == "kueue-release" for x in r.resources)]
    assert {r.stack for r in queued_stacks} >= {"av-resim", "training-autoscale", "batch-inference"}
    for r in queued_stacks:
        queued = [x for x in r.resources if x.type in ("kubernetes:batch/v1:CronJob", "kubernetes:batch/v1:Job",
                                                       "kubernetes:core/v1:ConfigMap")
                  and "kueue.x-k8s.io/queue-name" in json.dumps(x.inputs)]
        assert queued, r.stack
        for job in queued:
            assert "kueue-release" in r.upstream(job.name), (r.stack, job.name)
        assert "workspace-ns" in r.upstream("kueue-release"), r.stack


"""What a real `pulumi up`, preview and destroy need that mocks cannot show, checked on every render.

Each test names its source: the finding of the deploy audit it guards and the Azure or Kubernetes doc behind it.
"""

from __future__ import annotations

import inspect
import re

import pytest

from components.azure import roles
from components.azure.node_pools import FIXED_AT_CREATION
from components.gpu.operator import AKS_NVIDIA_RUNTIME
from components.gpu.sizes import vcpus_of
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE
from components.training.jobset import PERMANENT_FAILURE_RULE
from offline.mocks import DEPLOYER_OBJECT_ID
from offline.report import is_manifest
from program.config.schema import SYSTEM_POOL_DEFAULTS
from program.pipeline import deploy
from tests.docker_modules import DOCKER_DIR
from tests.helpers import STACKS, job_specs, jobset_templates, pod_spec, render_with, shape

ROLE = "azure-native:authorization:RoleAssignment"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "Job", "CronJob", "StatefulSet")


def role_id(guid: str) -> str:
    return f"/providers/Microsoft.Authorization/roleDefinitions/{guid}"


def workloads(render):
    return [r for r in render.resources if is_manifest(r) and r.inputs.get("kind") in WORKLOAD_KINDS]


@pytest.mark.parametrize("stack", STACKS)
def test_a_blob_upload_waits_for_its_container(stack, render_of):
    """Audit #2: a blob that names its container by a literal may upload before the container exists."""
    for blob in render_of(stack).of_type("azure-native:storage:Blob"):
        account = blob.depends_on[0].rsplit("-account", 1)[0]
        assert f"{account}-{blob.inputs['containerName']}" in blob.depends_on, blob.name


def test_private_registries_build_where_the_registry_is_reachable(render_shape):
    """Audit #1: a quick ACR Task run builds on public agents and cannot push into a private registry
    (learn.microsoft.com/azure/container-registry/manage-network-bypass-policy-for-tasks)."""
    r = render_shape("private-two-pools")
    assert r.cfg.registry.private
    assert not r.of_type("command:local:Command") and r.of_type("docker:index/image:Image")
    assert r.named("registry-acr").inputs["networkRuleBypassOptions"] == "None"


def test_the_cluster_identity_manages_the_node_subnet(render_shape):
    """Audit #6: with a BYO subnet the CLI grants the control plane Network Contributor, ARM does not
    (learn.microsoft.com/azure/aks/concepts-network-cni-overview; an internal LoadBalancer fails without it)."""
    r = render_shape("dev-minimal")
    (grant,) = [a for a in r.of_type(ROLE) if a.inputs["roleDefinitionId"].endswith(role_id(roles.NETWORK_CONTRIBUTOR))]
    assert grant.inputs["scope"].endswith("/subnets/nodes") and "net-nodes" in grant.depends_on
    # The principal is the cluster's own identity, known once the cluster exists.
    assert grant.inputs["principalType"] == "ServicePrincipal" and "aks-aks" in grant.depends_on
    assert re.fullmatch(r"[0-9a-f-]{36}", grant.inputs["principalId"])


VNET_WRITES = ("azure-native:network:Subnet", "azure-native:network:PrivateEndpoint",
               "azure-native:network:VirtualNetworkPeering", "azure-native:network:PrivateDnsZoneGroup",
               "azure-native:privatedns:VirtualNetworkLink")
AGENT_POOL = "azure-native:containerservice:AgentPool"


@pytest.mark.parametrize("stack", STACKS)
def test_aks_takes_over_the_vnet_after_every_other_write_to_it(stack, render_of):
    """Round-3 audit #6: AKS fails to set VNet ownership while another operation updates the VNet
    (Azure/AKS#4522 "SetVNetOwnershipFailed ... VirtualNetworkNotInSucceededState"; hashicorp/terraform-provider-azurerm
    #32682 serialises on the VNet for the same reason)."""
    r = render_of(stack)
    before_cluster = r.upstream("aks-aks")
    for write in (w for t in VNET_WRITES for w in r.of_type(t)):
        assert write.name in before_cluster, (stack, write.name)


@pytest.mark.parametrize("stack", STACKS)
def test_node_pools_are_created_one_at_a_time(stack, render_of):
    """Round-3 audit #6: AKS refuses a pool operation while another runs (cilium/cilium#25944 "OperationNotAllowed
    ... Another agentpool operation ... is in progress") and pools racing for one VNet fail (Azure/AKS#4522)."""
    pools = [p.name for p in render_of(stack).of_type(AGENT_POOL)]
    upstream = {p: render_of(stack).upstream(p) for p in pools}
    # A chain: one pool waits for no other, the next for one, the next for two...
    assert sorted(len(set(pools) & upstream[p]) for p in pools) == list(range(len(pools))), stack


def test_a_load_balancer_service_waits_for_the_control_planes_subnet_role(render_of, renders):
    """Round-3 audit #13: without Network Contributor on the BYO subnet the cloud provider's first attempt fails with
    LinkedAuthorizationFailed (learn.microsoft.com/azure/aks/concepts-network-cni-overview)."""
    services = [(stack, s) for stack in renders for s in render_of(stack).of_type("kubernetes:core/v1:Service")
                if s.inputs["spec"].get("type") == "LoadBalancer"]
    assert services
    for stack, service in services:
        assert "aks-network-contributor" in render_of(stack).upstream(service.name), stack


def test_the_program_waits_for_kubernetes_access_before_its_first_kubernetes_call_unless_told_not_to():
    """Audit #7: a new role assignment takes up to five minutes to take effect
    (learn.microsoft.com/azure/aks/entra-id-authorization); `pulumi up` must not need a rerun."""
    assert inspect.signature(deploy).parameters["preflight"].default is True


def test_the_deployer_may_write_recordings_and_read_results_of_av_resim(render_shape):
    """Audit #8: Owner or Contributor grant no blob data access; the uploadInput/downloadOutput outputs would 403
    (learn.microsoft.com/azure/storage/blobs/assign-azure-role-data-access)."""
    r = render_shape("private-two-pools")
    grants = {a.parent: a.inputs for a in r.of_type(ROLE) if a.name.endswith("-deployer-data")}
    assert grants["storage-input"]["roleDefinitionId"].endswith(role_id(roles.STORAGE_BLOB_DATA_CONTRIBUTOR))
    assert grants["storage-output"]["roleDefinitionId"].endswith(role_id(roles.STORAGE_BLOB_DATA_READER))
    for grant in grants.values():
        assert grant["principalId"] == DEPLOYER_OBJECT_ID
        assert grant["principalType"] == r.cfg.cluster.deployer_principal_type


def test_without_the_grant_the_commands_name_the_role_to_ask_for():
    config = {"scenario": "av-resim", "cluster": {"grantDeployerAdmin": False},
              "storage": {"accounts": [{"role": "input"}, {"role": "output"}]}}
    r = render_with(**config)
    assert not [a for a in r.of_type(ROLE) if a.name.endswith("-deployer-data")]
    assert "needs Storage Blob Data Contributor" in r.outputs["uploadInput"]
    assert "needs Storage Blob Data Reader" in r.outputs["downloadOutput"]


def test_pool_settings_aks_fixes_at_creation_replace_the_pool():
    """Audit #14: AKS refuses to change a pool's VM size, driver, priority, spot price or MIG profile
    (aks-managed-gpu-nodes, spot-node-pool, gpu-multi-instance); a change must replace, not fail as an update."""
    pools = render_with(cpuPools=[{"name": "cpu"}]).of_type("azure-native:containerservice:AgentPool")
    assert len(pools) == 2
    for pool in pools:
        assert set(pool.replace_on_changes) == set(FIXED_AT_CREATION) == \
            {"vmSize", "gpuProfile", "scaleSetPriority", "spotMaxPrice", "gpuInstanceProfile"}


@pytest.mark.parametrize("stack", STACKS)
def test_workloads_that_pull_from_the_registry_wait_for_the_pull_grant(stack, render_of):
    """Audit #15: the kubelet's AcrPull assignment propagates after it exists; pulls before it get 401."""
    r = render_of(stack)
    if r.cfg.registry.enabled:
        login = f"{r.cfg.registry_name}.azurecr.io/"
        for w in workloads(r):
            if any(c["image"].startswith(login) for c in pod_spec(w.revealed)["containers"]):
                assert "aks-acrpull" in w.depends_on, w.name


def test_the_default_system_pool_is_two_nodes_of_four_vcpus():
    """Audit #16: AKS asks of system pools at least two nodes of at least 4 vCPUs (use-system-pools); a stack may
    choose less (dev does, and says so)."""
    assert SYSTEM_POOL_DEFAULTS.min_count >= 2 and vcpus_of(SYSTEM_POOL_DEFAULTS.vm_size) >= 4


def gpu_deployments(r):
    """(Deployment, its pool, GPUs per pod, its most replicas) for every Deployment that holds GPUs."""
    scaled = {o.inputs["spec"]["scaleTargetRef"]["name"]: o.inputs["spec"]["maxReplicaCount"]
              for o in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
    found = []
    for d in r.of_type(DEPLOYMENT):
        pod = pod_spec(d.revealed)
        gpus = sum(int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["containers"])
        if gpus:
            pool = pod["nodeSelector"]["kubernetes.azure.com/agentpool"]
            most = scaled.get(d.inputs["metadata"]["name"], d.inputs["spec"].get("replicas", 1))
            found.append((d, pool, gpus, most))
    return found


def test_gpu_deployments_surge_only_into_a_spare_share(render_of, renders):
    """K1, round-3 k8s item 8: a surge pod needs one more GPU (or share) than a full pool at its maximum has, and the
    rollout would never finish; where the pool has a spare one, the new pod starts first and nothing goes down."""
    from components.kubernetes.pods import GPU_ROLLOUT, GPU_SURGE_ROLLOUT
    for stack in renders:
        r = render_of(stack)
        found = gpu_deployments(r)
        for d, pool, _, _ in found:
            strategy = d.revealed["spec"]["strategy"]
            assert strategy in (GPU_ROLLOUT, GPU_SURGE_ROLLOUT), (stack, d.name)
            if strategy == GPU_SURGE_ROLLOUT:
                capacity = r.cfg.gpu_pool(pool).schedulable_gpus_per_node * r.cfg.gpu_pool(pool).max_count
                on_pool = [x for x in found if x[1] == pool]
                assert capacity - sum(g * most for _, _, g, most in on_pool) >= len(on_pool), (stack, d.name)


def test_a_gpu_service_with_room_in_its_pool_rolls_out_without_going_down():
    from components.kubernetes.pods import GPU_SURGE_ROLLOUT
    config = shape("llm")
    r = render_with("llm-roomy", **{**config, "llm": {**config["llm"], "maxReplicas": 1}})
    (d,) = [d for d, *_ in gpu_deployments(r)]
    assert d.revealed["spec"]["strategy"] == GPU_SURGE_ROLLOUT  # 2 T4 nodes at most, 1 replica


def test_drains_take_one_replica_at_a_time_and_never_hold_a_single_one(renders):
    """Round-3 k8s audit #7: nothing bounded drains (node-image upgrades, consolidation). A budget on a single
    replica would block the drain until AKS fails the upgrade, so only services of two or more get one."""
    budgets = {(r.stack, b.inputs["metadata"]["name"]): b.inputs["spec"] for r in renders.values()
               for b in r.of_type("kubernetes:policy/v1:PodDisruptionBudget")}
    for r in renders.values():
        scaled_min = {o.inputs["spec"]["scaleTargetRef"]["name"]: o.inputs["spec"]["minReplicaCount"]
                      for o in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
        for d, *_ in gpu_deployments(r):
            name = d.inputs["metadata"]["name"]
            least = scaled_min.get(name, d.inputs["spec"].get("replicas", 1))
            budget = budgets.get((r.stack, name))
            assert (budget is not None) == (least >= 2), (r.stack, name)
            if budget:
                assert budget == {"maxUnavailable": 1, "selector": {"matchLabels": d.inputs["spec"]["selector"][
                    "matchLabels"]}}
    assert ("gpu-sharing-mig", "infer-1") in budgets


def test_upgrades_surge_a_node_first_and_happen_in_the_maintenance_window(render_of, renders):
    """Round-3 k8s audit #7: each weekly node-image roll drained GPU nodes whenever AKS chose; now it adds a node
    before draining one (aks upgrade-aks-node-pools: maxSurge, drainTimeoutInMinutes) and only in the window
    (aks planned-maintenance: aksManagedAutoUpgradeSchedule, aksManagedNodeOSUpgradeSchedule, 4 hours or more)."""
    priorities = set()
    for stack in renders:
        r = render_of(stack)
        for pool in r.of_type(AGENT_POOL):
            priorities.add(pool.inputs["scaleSetPriority"])
            # Round-4 Azure audit #3: AKS gives a spot pool's upgrade no surge node and no drain (spot-node-pool:
            # "Upgrade a Spot node pool"), so a spot pool says nothing it would not do.
            expected = None if pool.inputs["scaleSetPriority"] == "Spot" else {"maxSurge": "1",
                                                                                 "drainTimeoutInMinutes": 30}
            assert pool.inputs.get("upgradeSettings") == expected, (stack, pool.name)
        window = r.cfg.cluster.maintenance_window
        configs = {m.inputs["configName"]: m.inputs["maintenanceWindow"]
                   for m in r.of_type("azure-native:containerservice:MaintenanceConfiguration")}
        assert set(configs) == {"aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule"}, stack
        for value in configs.values():
            assert value == {"schedule": {"weekly": {"dayOfWeek": window.day.value, "intervalWeeks": 1}},
                             "startTime": window.start_time, "durationHours": window.duration_hours,
                             "utcOffset": window.utc_offset}
    assert priorities == {"Spot", "Regular"}  # the stacks hold both kinds
    unmanaged = render_with(cluster={"openApiServer": True, "nodeOsUpgradeChannel": "Unmanaged"})
    assert [m.inputs["configName"] for m in unmanaged.of_type(
        "azure-native:containerservice:MaintenanceConfiguration")] == ["aksManagedAutoUpgradeSchedule"]


def test_gpu_sharing_fills_its_pool_at_rest_so_surging_would_wait_for_a_node(render_shape):
    r = render_shape("time-slicing")
    pool = r.cfg.gpu_pool("shared")
    at_rest = {s.inputs["spec"]["scaleTargetRef"]["name"]: s.inputs["spec"]["minReplicaCount"]
               for s in r.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")}
    requested = sum(at_rest.get(d.inputs["metadata"]["name"], d.inputs["spec"].get("replicas", 1))
                    for d in r.of_type(DEPLOYMENT) for c in pod_spec(d.revealed)["containers"]
                    if "nvidia.com/gpu" in c["resources"].get("limits", {}))
    # Full at the pool's minimum: a surge pod would wait for a second node, so only maxSurge 0 rolls promptly.
    assert requested == pool.schedulable_gpus_per_node * pool.min_count


def test_a_failed_smoke_job_is_replaced_by_the_next_up_and_never_deleted_behind_pulumis_back(render_shape):
    """K2, K9: pulumi-kubernetes fails every later `up` on a Job with Failed=True unless replaceUnready is set;
    a TTL-deleted Job is re-created (from zero GPU nodes) by the next refresh."""
    render = render_shape("spot-from-zero")
    jobs = [j for j in render.of_type("kubernetes:batch/v1:Job") if j.parent == "gpu-smoke-test"]
    assert jobs
    for job in jobs:
        assert job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
        assert "ttlSecondsAfterFinished" not in job.inputs["spec"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_has_a_pod_failure_policy_that_ignores_disruptions(stack, render_of):
    """README claim; spot evictions must not use up backoffLimit (k8s Job pod failure policy)."""
    for w in workloads(render_of(stack)):
        spec = w.revealed["spec"]
        job = spec["jobTemplate"]["spec"] if "jobTemplate" in spec else spec if w.inputs["kind"] == "Job" else None
        if job is not None:
            ignored = {"type": "DisruptionTarget", "status": "True"}
            assert {"action": "Ignore", "onPodConditions": [ignored]} in job["podFailurePolicy"]["rules"]


JOB_SCRIPTS = {path.name for path in (DOCKER_DIR / "jobs").glob("*.py")}
"""The jobs image's scripts: each exits BAD_INPUT_EXIT_CODE on a bad argument or input (docker/jobs/jobio.py)."""


@pytest.mark.parametrize("stack", STACKS)
def test_a_job_script_that_refuses_its_input_fails_its_job_and_jobset_at_once(stack, render_of):
    """Issue 35 audit: a retry cannot mend a bad argument or input. The Job fails on the exit code (pod failure
    policy FailJob); a JobSet's Job failed that way has the reason PodFailurePolicy, which without a rule of its own
    restarts the whole group (jobset v0.12.0 pkg/controllers/failure_policy.go: RestartJobSet by default)."""
    render = render_of(stack)
    for name, job in job_specs(render):
        for container in job["template"]["spec"]["containers"]:
            command = container.get("command") or []
            if command[:1] == ["python"] and command[1] in JOB_SCRIPTS:
                assert {"action": "FailJob", "onExitCodes": {"containerName": container["name"], "operator": "In",
                                                             "values": [BAD_INPUT_EXIT_CODE]}} in \
                    job["podFailurePolicy"]["rules"], name
    for name, jobset in jobset_templates(render).items():
        if any(rj["template"]["spec"].get("podFailurePolicy") for rj in jobset["spec"]["replicatedJobs"]):
            assert PERMANENT_FAILURE_RULE in jobset["spec"]["failurePolicy"]["rules"], name


def test_the_blob_csi_controller_fits_one_node(render_shape):
    """K3: the controller uses hostNetwork, so two replicas never share a node and force a second system node."""
    assert render_shape("private-two-pools").named("blob-csi-release").inputs["values"]["controller"]["replicas"] == 1


def test_aks_driver_pools_get_the_runtime_class_aks_defines_and_mig_is_left_to_aks():
    """K5: on AKS-driver nodes the NVIDIA runtime is nvidia-container-runtime (NVIDIA's AKS guide); audit #18: the
    operator's MIG manager must not repartition what AKS partitioned."""
    r = render_with(gpuPools=[{"name": "a100", "vmSize": "Standard_NC24ads_A100_v4", "driver": "install",
                               "sharing": {"mode": "mig", "migProfile": "MIG1g"}}])
    values = r.named("gpu-operator-release").inputs["values"]
    assert values["operator"] == {"runtimeClass": AKS_NVIDIA_RUNTIME}
    assert values["migManager"] == {"enabled": False}


def test_operator_only_pools_keep_the_operators_own_runtime_class_and_it_can_upgrade_its_own_crds(render_shape):
    """K8: the chart's pre-upgrade CRD Job needs Helm's OpenAPI validation off (values.yaml, operator.upgradeCRD)."""
    release = render_shape("private-two-pools").named("gpu-operator-release").inputs
    assert "operator" not in release["values"] and release["disableOpenapiValidation"] is True


def test_protected_data_keeps_its_resource_group_and_the_render_shows_it(render_shape):
    """Audit #5: Azure deletes a resource group with everything in it, protected or not; `pulumi destroy
    --exclude-protected` must keep the group of protected data."""
    r = render_shape("private-two-pools")
    protected = {x.name for x in r.resources if x.protect}
    assert {"net-rg", "storage-output-account", "storage-output-output"} <= protected
    assert not {"storage-input-account", "aks-aks"} & protected
    assert not [x for x in render_shape("spot-from-zero").resources if x.protect]


def test_the_summary_warns_when_a_public_api_server_is_open_to_everyone(render_shape, tmp_path):
    from offline.report import write_render
    text = (write_render(render_shape("spot-from-zero"), tmp_path) / "summary.md").read_text()
    assert "**Warning: the public API server is open to every address**" in text
    text = (write_render(render_shape("private-two-pools"), tmp_path) / "summary.md").read_text()
    assert "Warning" not in text and "private API server" in text

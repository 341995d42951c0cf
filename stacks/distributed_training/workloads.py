"""One training run across nodes, and the NCCL all-reduce check that comes before it, as JobSets started on demand.

Each node runs one pod with all its GPUs and ``torchrun`` (one process per GPU); the pods meet on the first one
(JobSet's stable hostnames) and NCCL carries the gradients: over InfiniBand RDMA where the Network Operator offers
``rdma/shared_ib``, over the pod network otherwise. The trainer (docker/jobs/train.py) shards each global batch
over the processes, the leader checkpoints to blob storage with the run's own identity, and a run that loses a
node is restarted whole by JobSet and resumes from the newest checkpoint to the same weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes import core

from components.autoscaling.kueue import JobQueue, queue_labels
from components.azure.node_capacity import workload_capacity
from components.azure.node_provisioning import GpuPoolComponent
from components.gpu.network_operator import RDMA_RESOURCE
from components.kubernetes.network_policy import allow_https_to_internet, allow_within
from components.kubernetes.pods import BAD_INPUT_EXIT_CODE, container, pod_spec
from components.kubernetes.security import rdma_container_security_context, rdma_pod_security_context, resources
from components.kubernetes.workspace import Workspace
from components.training.jobset import (
    JOB_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    RunSpec,
    RunTemplate,
    RunTemplateArgs,
    jobset_manifest,
    torchrun,
)
from components.volumes.blob_volume import WorkloadVolumes

CHECKPOINT_MOUNT = "/mnt/checkpoints"
TRAIN_RUN, ALLREDUCE_RUN = "train", "nccl-allreduce"
"""The JobSets' names."""
WORKERS = "node"
"""The replicated job: one Job, one pod per node."""
TORCH_RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
"""docker/jobs/train.py's TORCH_RESTART_ENV: a restarted worker never reads the first attempt's rendezvous store
(pytorch/pytorch#135712)."""
RUN_DEADLINE_SECONDS = 6 * 3600
"""A run's longest life, restarts included."""
ALLREDUCE_MAX_BYTES = 1 << 34
"""16 GiB, the largest message of the all-reduce check: the size Microsoft's baselines are measured at."""
TOPOLOGY_MOUNT = "/opt/nvidia-topology"
TOPOLOGY_KEY = "topo.xml"


def leader(run: str) -> str:
    """The label selector of a run's first pod, whose process prints the run's results."""
    return f"{JOBSET_NAME_LABEL}={run},{JOB_INDEX_LABEL}=0"


def nccl_env(rdma: bool, topology: bool) -> dict[str, str]:
    """NCCL over InfiniBand with GPUDirect RDMA (Azure/aks-rdma-infiniband tests/scenarios/k8s/values.yaml), or
    over the pod network; its bootstrap always over the pod's eth0. With the VM's topology file NCCL pairs each GPU
    with its nearest NIC, and CUDA numbers the GPUs in the file's (PCI bus) order, as Azure's NCCL test runs it
    (tests/scenarios/k8s/templates/mpi-job.yaml)."""
    network = {"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "SYS"} if rdma else {"NCCL_IB_DISABLE": "1"}
    layout = {"NCCL_TOPO_FILE": f"{TOPOLOGY_MOUNT}/{TOPOLOGY_KEY}", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} \
        if topology else {}
    return {**network, **layout, "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}


@dataclass(frozen=True)
class Thresholds:
    """The all-reduce check's verdict: typical bus bandwidth, and the figures below which it is slow and faulty
    (GB/s); all None: it reports its figures only."""

    expect: float | None = None
    warn_below: float | None = None
    faulty_below: float | None = None

    def flags(self) -> list[str]:
        pairs = (("--expect-busbw", self.expect), ("--warn-below", self.warn_below),
                 ("--faulty-below", self.faulty_below))
        return [part for flag, value in pairs if value is not None for part in (flag, str(value))]


@dataclass(frozen=True)
class DistributedArgs:
    pool: GpuPoolComponent
    """The GPU pool a run's nodes come from."""
    jobs_image: pulumi.Input[str]
    """The jobs image (docker/jobs: train.py, allreduce.py, torch with NCCL)."""
    workspace: Workspace
    """The scenario's namespace (it holds the checkpoint claim and the run templates)."""
    nodes: int
    """Nodes of one run: one pod each."""
    gpus_per_node: int
    """Processes (one per GPU) each pod runs."""
    steps: int
    """Optimisation steps of a training run."""
    batch_size: int
    """Global batch of each step, split evenly over every process."""
    rdma: bool
    """Pods ask for ``rdma/shared_ib`` and NCCL uses InfiniBand; they run as root with IPC_LOCK, in a namespace
    that allows it (``SecurityException.RDMA_MEMORY_LOCK``)."""
    thresholds: Thresholds
    """The all-reduce check's verdict."""
    checkpoint_container: str
    """Blob container of the checkpoints."""
    train_volumes: WorkloadVolumes
    """The run's identity and its read-write claim of the checkpoint container."""
    topology: str | None = None
    """NCCL's topology file of the VM size (Azure's XML), mounted into every pod; None: NCCL finds its own."""
    queue: JobQueue | None = None
    """Kueue's queue: a run is admitted whole or waits."""
    after: tuple[pulumi.Resource, ...] = ()
    """What the templates wait for (the JobSet controller)."""


class DistributedTraining(pulumi.ComponentResource):
    submit_allreduce: pulumi.Input[str]
    allreduce_result: str
    submit_training: pulumi.Input[str]
    training_logs: str

    def __init__(self, name: str, args: DistributedArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:workloads:DistributedTraining", name, None, opts)  # frozen: components/__init__.py
        ns = args.workspace.name
        labels = {"app.kubernetes.io/name": "distributed", "app.kubernetes.io/part-of": name}
        # The processes of a run talk to each other on ports they pick; MNIST comes from a public mirror.
        allow_within(f"{name}-allow-peers", "distributed-peers", args.workspace.namespace, labels, self)
        allow_https_to_internet(f"{name}-allow-https", "distributed-https", args.workspace.namespace, labels, self)
        # The manifests name the namespace as plain text: they wait for it (and for the JobSet CRD) explicitly.
        after = (args.workspace, *args.after)
        children = pulumi.ResourceOptions(parent=self)

        topology = None
        if args.topology is not None:
            topology = core.v1.ConfigMap(f"{name}-nccl-topology", metadata={
                "name": "nccl-topology", "namespace": args.workspace.namespace, "labels": labels},
                data={TOPOLOGY_KEY: args.topology}, opts=children).metadata["name"]
        # Every run is owned by the checkpoint claim, so `pulumi destroy` deletes the runs before it.
        claim = args.train_volumes.claims[args.checkpoint_container]
        # Checked before torchrun starts (launch.py): a bad argument or a refused checkpoint fails the run once.
        trainer = self._pod(args, "train", torchrun(TRAIN_RUN, WORKERS, ns, args.nodes, args.gpus_per_node, [
            "train.py", "--checkpoints", f"{CHECKPOINT_MOUNT}/{TRAIN_RUN}", "--steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--data", "auto"], checked=True),
            volumes=({"name": "checkpoints", "persistentVolumeClaim": {
                "claimName": claim}},),
            mounts=({"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT},),
            service_account=args.train_volumes.service_account, topology=topology)
        train = RunTemplate(f"{name}-train", RunTemplateArgs(jobset_manifest(RunSpec(
            TRAIN_RUN, WORKERS, args.nodes, trainer, labels, deadline_seconds=RUN_DEADLINE_SECONDS,
            fail_on_exit_codes={"train": [BAD_INPUT_EXIT_CODE]}), ns,
            queue_labels(args.queue), claim), ns, TRAIN_RUN, after, claim), opts=children)

        checker = self._pod(args, "allreduce", torchrun(ALLREDUCE_RUN, WORKERS, ns, args.nodes, args.gpus_per_node, [
            "allreduce.py", "--device", "cuda", "--max-bytes", str(ALLREDUCE_MAX_BYTES), *args.thresholds.flags()]),
            topology=topology)
        allreduce = RunTemplate(f"{name}-allreduce", RunTemplateArgs(jobset_manifest(RunSpec(
            ALLREDUCE_RUN, WORKERS, args.nodes, checker, labels, max_restarts=0, deadline_seconds=3600), ns,
            queue_labels(args.queue), claim), ns, ALLREDUCE_RUN, after, claim), opts=children)

        self.submit_training, self.submit_allreduce = train.submit_command, allreduce.submit_command
        self.training_logs = f"kubectl -n {ns} logs -f -l {leader(TRAIN_RUN)} --tail -1"
        # The leader prints one line per message size, then the JSON verdict: pass, slow, faulty or wrong-sum.
        self.allreduce_result = (f"kubectl -n {ns} logs -l {leader(ALLREDUCE_RUN)} --tail 40 && "
                                 f"kubectl -n {ns} get jobset {ALLREDUCE_RUN}")
        self.register_outputs({"submit_training": self.submit_training})

    @staticmethod
    def _pod(args: DistributedArgs, name: str, command: list[str], volumes: tuple[Mapping[str, Any], ...] = (),
             mounts: tuple[Mapping[str, Any], ...] = (), service_account: str | None = None,
             topology: pulumi.Input[str] | None = None) -> dict[str, Any]:
        """A node's pod: all its GPUs, half of what the node leaves pods in CPU and memory, the RDMA devices (and
        the memory lock their registrations need), NCCL's topology file of the VM, and shared memory for NCCL's
        transfers between the GPUs of the node."""
        size = args.pool.gpu.size
        capacity = workload_capacity(size.vcpus, size.memory_gib)
        limits = resources(f"{capacity.cpu_m // 2}m", f"{capacity.memory_mi // 2}Mi", gpus=args.gpus_per_node)
        if args.rdma:
            limits = {kind: {**amounts, RDMA_RESOURCE: "1"} for kind, amounts in limits.items()}
        shm = {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}
        layout = ({"name": "nccl-topology", "configMap": {"name": topology}},) if topology is not None else ()
        layout_mounts = ({"name": "nccl-topology", "mountPath": TOPOLOGY_MOUNT, "readOnly": True},) \
            if topology is not None else ()
        worker = container(name, args.jobs_image, command, limits,
                           mounts=[*mounts, *layout_mounts, {"name": "shm", "mountPath": "/dev/shm"}],  # noqa: S108 (the pod's shared memory)
                           env={**TORCH_RESTART_ENV, **nccl_env(args.rdma, topology is not None)})
        if args.rdma:
            worker["securityContext"] = rdma_container_security_context()
        pod = pod_spec(args.pool, [worker], volumes=[*volumes, *layout, shm], service_account=service_account)
        if args.rdma:
            pod["securityContext"] = rdma_pod_security_context()
        return pod

"""The Kubernetes provider every in-cluster resource of a stack uses, with a non-interactive kubeconfig."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_azure_native import containerservice as cs

from components.kubernetes.kubeconfig import kubelogin_kubeconfig
from components.kubernetes.preflight import require_reachable, wait_for_access, wait_for_crds
from components.vocabulary import LoginMode


@dataclass(frozen=True)
class KubernetesAccessArgs:
    cluster: pulumi.Resource
    """The AKS cluster resource: credentials are read only once it exists (not during a first preview)."""
    cluster_name: pulumi.Input[str]
    """Name of the AKS cluster."""
    resource_group_name: pulumi.Input[str]
    """Its resource group."""
    login_mode: LoginMode
    """kubelogin mode: azurecli, spn, workloadidentity or msi."""
    local_accounts: bool = False
    """Use the admin (certificate) kubeconfig; only when the cluster keeps local accounts."""
    wait_for: list[pulumi.Resource] | None = None
    """Role assignments the credentials depend on (Azure RBAC grants are invisible to Pulumi's graph)."""
    private: bool = False
    """Private API server: reachable only from the cluster's VNet (or one linked to its private DNS zone)."""
    preflight: bool = True
    """Before any Kubernetes resource is touched: check a private API server answers from here, and wait until
    the deployer's access works (role assignments take minutes to propagate): for a preview, read access only
    (components/kubernetes/preflight.py). Off only without a cluster."""
    reachable_after: Sequence[pulumi.Resource] = ()
    """What this machine needs before it reaches a private API server (the runner's peering and DNS link): the
    credentials, and so the reachability check, wait for them."""
    add_on_crds: tuple[str, ...] = ()
    """Custom resource kinds AKS add-ons install that the program writes (managed Prometheus's PodMonitor,
    KEDA's ScaledObject): the preflight waits until the cluster serves them."""


def _decode(credentials: cs.CredentialResultsResponse | cs.ListManagedClusterUserCredentialsResult) -> str:
    return base64.b64decode(credentials.kubeconfigs[0].value).decode()


class KubernetesAccess(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """The kubeconfig, as a secret."""
    provider: k8s.Provider

    def __init__(self, name: str, args: KubernetesAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:aks:KubernetesAccess", name, None, opts)  # frozen: components/__init__.py
        # The cluster's name is known before the cluster exists; without this edge a first `pulumi preview`
        # would ask Azure for credentials of a cluster that is not there yet.
        invoke = pulumi.InvokeOutputOptions(parent=self, depends_on=[args.cluster, *args.reachable_after])
        if args.local_accounts:
            # Admin credentials bypass Entra ID and audit; they exist only when local accounts are enabled.
            admin = cs.list_managed_cluster_admin_credentials_output(
                resource_group_name=args.resource_group_name, resource_name=args.cluster_name, opts=invoke)
            kubeconfig = admin.apply(_decode)
        else:
            user = cs.list_managed_cluster_user_credentials_output(
                resource_group_name=args.resource_group_name, resource_name=args.cluster_name, opts=invoke)
            kubeconfig = user.apply(
                lambda c: kubelogin_kubeconfig(_decode(c), args.login_mode))
        # A preview writes nothing in the cluster: it needs read access only, and no add-on kind yet.
        preview = pulumi.runtime.is_dry_run()
        if args.preflight and args.private:
            kubeconfig = kubeconfig.apply(require_reachable)
        if args.preflight:
            kubeconfig = kubeconfig.apply(lambda k: wait_for_access(k, preview=preview))
        if args.preflight and args.add_on_crds and not preview:
            kubeconfig = kubeconfig.apply(lambda k: wait_for_crds(k, args.add_on_crds))
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.wait_for or []),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})

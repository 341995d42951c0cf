"""The Kubernetes provider's credentials: user kubeconfig through kubelogin, admin only with local accounts."""

import contextvars

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.kubernetes.access import KubernetesAccess, KubernetesAccessArgs
from offline.mocks import AzureMocks
from offline.render import render_stack

USER_CREDS = "azure-native:containerservice:listManagedClusterUserCredentials"
ADMIN_CREDS = "azure-native:containerservice:listManagedClusterAdminCredentials"


def _access(preview: bool, **args) -> tuple[str, bool]:
    """A KubernetesAccess of a mocked cluster, as in a preview or a deploy: its kubeconfig and whether it is a
    secret."""
    def run() -> tuple[str, bool]:
        pulumi_mocks.set_mocks(AzureMocks("t"), project="aksgpu", stack="t", preview=preview)
        holder = {}

        def program():
            cluster = pulumi.CustomResource("azure-native:containerservice:ManagedCluster", "aks",
                                            {"resourceName": "aks-t", "resourceGroupName": "rg-t"})
            holder["access"] = KubernetesAccess("k8s", KubernetesAccessArgs(
                cluster=cluster, cluster_name="aks-t", resource_group_name="rg-t", **args))

        _sync_await(run_pulumi_func(program))
        out = holder["access"].kubeconfig
        return _sync_await(out.future()), _sync_await(out.is_secret())
    return contextvars.Context().run(run)


def _kubeconfig_for(login_mode: str) -> tuple[str, bool]:
    return _access(False, login_mode=login_mode, preflight=False)


def test_provider_kubeconfig_is_a_secret_using_kubelogin_without_devicecode():
    kubeconfig, secret = _kubeconfig_for("workloadidentity")
    assert secret
    exec_ = yaml.safe_load(kubeconfig)["users"][0]["user"]["exec"]
    assert exec_["args"][:3] == ["get-token", "--login", "workloadidentity"]
    assert "devicecode" not in kubeconfig


def test_stacks_fetch_user_credentials_never_admin_ones(render_shape):
    r = render_shape("dev-minimal")
    assert USER_CREDS in r.invokes and ADMIN_CREDS not in r.invokes


def test_admin_credentials_are_used_only_when_local_accounts_are_enabled(tmp_path):
    config = tmp_path / "Pulumi.local.yaml"
    config.write_text(yaml.safe_dump({"config": {"aksgpu:cluster": {"localAccounts": True, "openApiServer": True}}}))
    r = render_stack("local", config)
    assert ADMIN_CREDS in r.invokes and USER_CREDS not in r.invokes
    assert r.named("aks-aks").inputs["disableLocalAccounts"] is False


def _preflight_in(preview: bool, monkeypatch) -> tuple[list[bool], list[tuple[str, ...]]]:
    """Which access a KubernetesAccess with add-on kinds waits for, in a preview or a deploy."""
    from components.kubernetes import access
    waited, crds = [], []
    monkeypatch.setattr(access, "wait_for_access", lambda k, preview: waited.append(preview) or k)
    monkeypatch.setattr(access, "wait_for_crds", lambda k, names: crds.append(tuple(names)) or k)

    _access(preview, login_mode="azurecli", add_on_crds=("scaledobjects.keda.sh",))
    return waited, crds


def test_a_preview_asks_the_cluster_for_read_access_only_and_waits_for_no_add_on_kind(monkeypatch):
    """Issue 33b audit #1: the preview app reads (AKS RBAC Reader); a preview writes no custom resource, and its
    identity may not read CustomResourceDefinitions."""
    assert _preflight_in(True, monkeypatch) == ([True], [])
    assert _preflight_in(False, monkeypatch) == ([False], [("scaledobjects.keda.sh",)])

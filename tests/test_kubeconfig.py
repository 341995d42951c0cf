import pytest
import yaml

from components.kubernetes.kubeconfig import AKS_SERVER_ID, kubelogin_kubeconfig
from offline.mocks import TENANT, aad_kubeconfig

AKS = aad_kubeconfig("aks-dev", "rg-dev", "aks-dev-1234.hcp.eastus.azmk8s.io")


def exec_of(kubeconfig: str) -> dict:
    return yaml.safe_load(kubeconfig)["users"][0]["user"]["exec"]


def test_devicecode_login_is_replaced_by_non_interactive_azurecli():
    ex = exec_of(kubelogin_kubeconfig(AKS, "azurecli"))
    assert ex["command"] == "kubelogin"
    assert ex["args"][:5] == ["get-token", "--login", "azurecli", "--server-id", AKS_SERVER_ID]
    assert "devicecode" not in ex["args"]
    assert ex["interactiveMode"] == "Never"


def test_spn_mode_names_the_tenant_and_takes_client_and_secret_only_from_the_environment():
    ex = exec_of(kubelogin_kubeconfig(AKS, "spn"))
    assert ["--tenant-id", TENANT] == ex["args"][ex["args"].index("--tenant-id"):][:2]
    assert "--client-id" not in ex["args"]
    assert not any("secret" in a.lower() for a in ex["args"])


def test_workloadidentity_mode_takes_identity_from_environment():
    ex = exec_of(kubelogin_kubeconfig(AKS, "workloadidentity"))
    assert ex["args"][2] == "workloadidentity" and "--client-id" not in ex["args"]


def test_devicecode_mode_is_not_a_login_mode():
    with pytest.raises(ValueError, match="'devicecode' is not a valid LoginMode"):
        kubelogin_kubeconfig(AKS, "devicecode")


def test_cluster_and_context_survive_conversion():
    before, after = yaml.safe_load(AKS), yaml.safe_load(kubelogin_kubeconfig(AKS, "msi"))
    assert after["clusters"] == before["clusters"] and after["contexts"] == before["contexts"]

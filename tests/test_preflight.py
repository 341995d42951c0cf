"""The checks before any Kubernetes call: a private server is reachable, and the deployer's access works."""

from __future__ import annotations

import json
import socket
import sys

import pulumi
import pytest
import yaml

from components.kubernetes import preflight
from components.kubernetes.kubeconfig import kubelogin_kubeconfig
from offline.mocks import aad_kubeconfig
from tests.local_http import QuietHandler, base_url, serving

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: aks
  cluster: {server: "https://%s:%d"}
"""
AKS = kubelogin_kubeconfig(aad_kubeconfig("aks-x", "rg-x", "aks-x-1234.hcp.eastus.azmk8s.io"), "azurecli")


def test_a_name_that_does_not_resolve_is_reported_with_the_private_dns_reason():
    problem = preflight.api_server_problem("aks-x.privatelink.eastus.azmk8s.invalid")
    assert "does not resolve here" in problem and "private DNS zone" in problem


def test_an_open_port_is_reachable_and_a_closed_one_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert preflight.api_server_problem("127.0.0.1", port, timeout=2) is None
    assert "does not answer" in preflight.api_server_problem("127.0.0.1", port, timeout=2)


def test_the_server_comes_from_the_kubeconfig():
    host = "aks-x.hcp.eastus.azmk8s.io"
    assert preflight.server_of(KUBECONFIG % (host, 443)) == (host, 443)


def test_an_unreachable_private_server_stops_the_deployment_with_one_line():
    with pytest.raises(pulumi.RunError) as error:
        preflight.require_reachable(KUBECONFIG % ("aks-x.privatelink.eastus.azmk8s.invalid", 443))
    message = str(error.value)
    assert message.startswith("private AKS API server unreachable from this machine:")
    assert "self-hosted runner in the cluster's VNet" in message and "\n" not in message


class Clock:
    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds):
        self.now += seconds

    def __call__(self):
        return self.now


def test_access_is_polled_until_the_role_assignment_takes_effect():
    answers, clock = iter([False, False, True]), Clock()
    result = preflight.wait_for_access(AKS, token=lambda _: "t", allowed=lambda *_: next(answers),
                                       sleep=clock.sleep, clock=clock)
    assert result == AKS and clock.now == 2 * preflight.ACCESS_POLL_SECONDS


def test_access_that_never_comes_stops_with_one_line_naming_the_fix():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_access(AKS, timeout=60, interval=15, token=lambda _: "t", allowed=lambda *_: False,
                                  sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "may not manage Kubernetes objects after 60s" in message and "grantDeployerAdmin" in message
    assert "\n" not in message and clock.now == 60


def test_a_certificate_user_has_no_role_to_wait_for():
    def never(*_):
        raise AssertionError("no access review for a certificate user")
    assert preflight.wait_for_access("users: []", token=lambda _: None, allowed=never) == "users: []"


def test_the_token_comes_from_the_exec_plugin(tmp_path):
    plugin = tmp_path / "kubelogin"
    plugin.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      "assert sys.argv[1:4] == ['get-token', '--login', 'azurecli']\n"
                      "print(json.dumps({'status': {'token': 'tok'}}))\n")
    plugin.chmod(0o755)
    config = yaml.safe_load(AKS)
    config["users"][0]["user"]["exec"]["command"] = str(plugin)
    assert preflight.exec_token(yaml.safe_dump(config)) == "tok"


def test_a_missing_kubelogin_is_one_line_with_the_install_hint():
    config = yaml.safe_load(AKS)
    config["users"][0]["user"]["exec"]["command"] = "kubelogin-that-is-not-installed"
    with pytest.raises(pulumi.RunError, match="not found: kubelogin is required: az aks install-cli"):
        preflight.exec_token(yaml.safe_dump(config))


def kubeconfig_for(server) -> str:
    return yaml.safe_dump({"clusters": [{"name": "aks", "cluster": {"server": base_url(server)}}]})


@pytest.fixture
def api_server():
    """A plain-HTTP stand-in for the API server that answers access reviews with ``allowed``."""
    seen = []

    class Handler(QuietHandler):
        allowed = False

        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers["Authorization"], body))
            if self.headers["Authorization"] != "Bearer good":
                self.reply(401)
                return
            self.reply(201, json.dumps({**body, "status": {"allowed": Handler.allowed}}).encode())

    with serving(Handler) as server:
        yield kubeconfig_for(server), Handler, seen


def test_the_access_review_asks_for_everything_with_the_token(api_server):
    config, handler, seen = api_server
    assert preflight.may(config, "good") is False
    handler.allowed = True
    assert preflight.may(config, "good") is True
    assert preflight.may(config, "expired") is False
    path, auth, body = seen[0]
    assert path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and auth == "Bearer good"
    assert body["kind"] == "SelfSubjectAccessReview"
    assert body["spec"]["resourceAttributes"] == {"verb": "*", "group": "*", "resource": "*"}


def test_a_preview_waits_only_for_read_access_and_a_deploy_for_everything():
    """Issue 33b audit #1: the preflight asked every run, previews too, for a SelfSubjectAccessReview of `*`, so the
    preview app needed AKS RBAC Cluster Admin. A preview writes nothing in the cluster (pulumi-kubernetes
    provider/pkg/provider/provider.go: a Forbidden server-side dry run falls back to a client-side preview), so it
    asks to read (list namespaces: AKS RBAC Reader's namespaces/read) and a deploy still asks for everything."""
    asked = []

    def allowed(_kubeconfig, _token, attributes):
        asked.append(attributes)
        return attributes == preflight.PREVIEW_ACCESS  # what AKS RBAC Reader answers
    assert preflight.wait_for_access(AKS, preview=True, token=lambda _: "t", allowed=allowed) == AKS
    assert asked == [{"verb": "list", "group": "", "resource": "namespaces"}]
    clock = Clock()
    with pytest.raises(pulumi.RunError, match="may not manage Kubernetes objects"):
        preflight.wait_for_access(AKS, token=lambda _: "t", allowed=allowed, timeout=30, sleep=clock.sleep,
                                  clock=clock)
    assert asked[-1] == {"verb": "*", "group": "*", "resource": "*"}


def test_a_preview_without_read_access_stops_with_one_line_naming_the_role():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_access(AKS, preview=True, timeout=30, interval=15, token=lambda _: "t",
                                  allowed=lambda *_: False, sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "pulumi preview still may not read Kubernetes objects after 30s" in message
    assert "Azure Kubernetes Service RBAC Reader" in message and "\n" not in message


def test_add_on_kinds_are_polled_until_the_cluster_serves_them():
    served = {"podmonitors.azmonitoring.coreos.com": iter([False, True, True]),
              "scaledobjects.keda.sh": iter([True, True, True])}
    clock = Clock()
    result = preflight.wait_for_crds(AKS, list(served), token=lambda _: "t",
                                     established=lambda _k, _t, name: next(served[name]),
                                     sleep=clock.sleep, clock=clock)
    assert result == AKS and clock.now == preflight.ACCESS_POLL_SECONDS


def test_an_add_on_kind_that_never_comes_stops_with_one_line_naming_it():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_crds(AKS, ["scaledobjects.keda.sh"], timeout=30, interval=15, token=lambda _: "t",
                                established=lambda *_: False, sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "does not serve scaledobjects.keda.sh after 30s" in message and "KEDA" in message
    assert "\n" not in message


@pytest.fixture
def crd_server():
    """A stand-in API server that knows one established CRD."""
    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            name = self.path.rsplit("/", 1)[-1]
            if not self.path.startswith("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/") or \
                    name != "podmonitors.azmonitoring.coreos.com":
                self.reply(404)
                return
            established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
            self.reply(200, json.dumps(established).encode())

    with serving(Handler) as server:
        yield kubeconfig_for(server)


def test_a_served_crd_is_established_and_an_unknown_one_is_not(crd_server):
    assert preflight.crd_established(crd_server, "t", "podmonitors.azmonitoring.coreos.com") is True
    assert preflight.crd_established(crd_server, "t", "scaledobjects.keda.sh") is False


def test_the_stack_waits_for_the_add_on_kinds_it_writes_and_those_its_scenario_needs():
    from program.layers.azure import add_on_crds
    from program.needs import Needs
    from tests.helpers import load

    assert add_on_crds(load({}), Needs(autoscaled=True)) == (
        "podmonitors.azmonitoring.coreos.com", "scaledobjects.keda.sh", "triggerauthentications.keda.sh")
    assert add_on_crds(load({}), Needs()) == ("podmonitors.azmonitoring.coreos.com",)  # nothing scaled, no KEDA kinds
    assert add_on_crds(load({"monitoring": {"enabled": False}, "addons": {"keda": False}}),
                       Needs(add_on_kinds=("workspaces.kaito.sh",))) == ("workspaces.kaito.sh",)

"""The checks before any Kubernetes call: a private server is reachable, and the deployer's access works."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import sys
import threading
import urllib.error
from http.server import ThreadingHTTPServer

import pulumi
import pytest
import yaml

from components.kubernetes import preflight
from components.kubernetes.kubeconfig import kubelogin_kubeconfig
from offline.mocks import aad_kubeconfig
from testcluster.pki import make as make_pki
from tests.local_http import QuietHandler, base_url, running, serving

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


ENTRA = preflight.Credentials("https://aks-x.hcp.eastus.azmk8s.io", token="t", entra=True)


def test_access_is_polled_until_the_role_assignment_takes_effect():
    answers, clock = iter([False, False, True]), Clock()
    result = preflight.wait_for_access(AKS, login=lambda _: ENTRA, allowed=lambda *_: next(answers),
                                       sleep=clock.sleep, clock=clock)
    assert result == AKS and clock.now == 2 * preflight.ACCESS_POLL_SECONDS


def test_access_that_never_comes_stops_with_one_line_naming_the_fix():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_access(AKS, timeout=60, interval=15, login=lambda _: ENTRA, allowed=lambda *_: False,
                                  sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "may not manage Kubernetes objects after 60s" in message and "grantDeployerAdmin" in message
    assert "\n" not in message and clock.now == 60


def test_a_local_account_has_no_role_to_wait_for():
    def never(*_):
        raise AssertionError("no access review for a local account")
    local = preflight.Credentials("https://aks-x", token="static", client_cert=("cert", "key"))
    assert preflight.wait_for_access(AKS, login=lambda _: local, allowed=never) == AKS


def plugin_printing(tmp_path, status: dict) -> str:
    """AKS's kubeconfig with kubelogin replaced by a script that checks its arguments and prints ``status``."""
    plugin = tmp_path / "kubelogin"
    plugin.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      "assert sys.argv[1:4] == ['get-token', '--login', 'azurecli']\n"
                      f"print(json.dumps({{'status': {status!r}}}))\n")
    plugin.chmod(0o755)
    config = yaml.safe_load(AKS)
    config["users"][0]["user"]["exec"]["command"] = str(plugin)
    return yaml.safe_dump(config)


def test_an_entra_id_user_gets_its_token_from_the_exec_plugin(tmp_path):
    user = preflight.credentials(plugin_printing(tmp_path, {"token": "tok"}))
    assert user.token == "tok" and user.entra and user.client_cert is None
    assert user.server == "https://aks-x-1234.hcp.eastus.azmk8s.io:443" and "MOCK" in user.ca_pem


def test_a_missing_kubelogin_is_one_line_with_the_install_hint():
    config = yaml.safe_load(AKS)
    config["users"][0]["user"]["exec"]["command"] = "kubelogin-that-is-not-installed"
    with pytest.raises(pulumi.RunError, match="not found: kubelogin is required: az aks install-cli"):
        preflight.credentials(yaml.safe_dump(config))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def admin_kubeconfig(server: str, ca: str, cert: str, key: str, token: str = "static-admin-token") -> str:
    """The shape of the AKS admin kubeconfig (cluster.localAccounts): a client certificate, its key and a static
    token in one user (Azure/AKS#3294 shows one; hjacobs/pykube#44 added the pair for AKS)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "aks-x-admin",
        "clusters": [{"name": "aks-x", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "contexts": [{"name": "aks-x-admin", "context": {"cluster": "aks-x", "user": "clusterAdmin_rg_aks-x"}}],
        "users": [{"name": "clusterAdmin_rg_aks-x", "user": {
            "client-certificate-data": b64(cert), "client-key-data": b64(key), "token": token}}],
    })


def test_a_local_account_user_has_its_certificate_and_token():
    user = preflight.credentials(admin_kubeconfig("https://aks-x:443", "CA", "CERT", "KEY"))
    assert user.client_cert == ("CERT", "KEY") and user.token == "static-admin-token" and not user.entra
    assert user.ca_pem == "CA" and user.server == "https://aks-x:443"


def test_credentials_come_from_the_current_context_and_files_where_the_kubeconfig_names_them(tmp_path):
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "ca.crt").write_text("CA-FILE")
    config = yaml.safe_load(admin_kubeconfig("https://other:443", "CA", "CERT", "KEY"))
    config["clusters"].append({"name": "mine", "cluster": {"server": "https://mine:443/",
                                                           "certificate-authority": str(tmp_path / "ca.crt")}})
    config["users"].append({"name": "me", "user": {"tokenFile": str(tmp_path / "token")}})
    config["contexts"].append({"name": "mine", "context": {"cluster": "mine", "user": "me"}})
    config["current-context"] = "mine"
    user = preflight.credentials(yaml.safe_dump(config))
    assert (user.server, user.ca_pem, user.token, user.client_cert) == ("https://mine:443", "CA-FILE", "from-file",
                                                                          None)
    assert preflight.server_of(yaml.safe_dump(config)) == ("mine", 443)


def test_a_user_kind_the_preflight_cannot_use_is_one_line_naming_it():
    config = yaml.safe_load(admin_kubeconfig("https://aks-x:443", "CA", "CERT", "KEY"))
    config["users"][0]["user"] = {"auth-provider": {"name": "azure", "config": {}}}
    with pytest.raises(pulumi.RunError, match="authenticates with auth-provider, which the preflight does not"):
        preflight.credentials(yaml.safe_dump(config))


def plain(server) -> preflight.Credentials:
    return preflight.Credentials(base_url(server), token="good")


@pytest.fixture
def api_server():
    """A plain-HTTP stand-in for the API server that answers access reviews with ``allowed``."""
    seen = []

    class Handler(QuietHandler):
        allowed = False

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers["Authorization"], body))
            if self.headers["Authorization"] != "Bearer good":
                self.reply(401)
                return
            self.reply(201, json.dumps({**body, "status": {"allowed": Handler.allowed}}).encode())

    with serving(Handler) as server:
        yield plain(server), Handler, seen


def test_the_access_review_asks_for_everything_with_the_token(api_server):
    user, handler, seen = api_server
    assert preflight.may(user) is False
    handler.allowed = True
    assert preflight.may(user) is True
    assert preflight.may(preflight.Credentials(user.server, token="expired")) is False
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

    def allowed(_credentials, attributes):
        asked.append(attributes)
        return attributes == preflight.PREVIEW_ACCESS  # what AKS RBAC Reader answers
    assert preflight.wait_for_access(AKS, preview=True, login=lambda _: ENTRA, allowed=allowed) == AKS
    assert asked == [{"verb": "list", "group": "", "resource": "namespaces"}]
    clock = Clock()
    with pytest.raises(pulumi.RunError, match="may not manage Kubernetes objects"):
        preflight.wait_for_access(AKS, login=lambda _: ENTRA, allowed=allowed, timeout=30, sleep=clock.sleep,
                                  clock=clock)
    assert asked[-1] == {"verb": "*", "group": "*", "resource": "*"}


def test_a_preview_without_read_access_stops_with_one_line_naming_the_role():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_access(AKS, preview=True, timeout=30, interval=15, login=lambda _: ENTRA,
                                  allowed=lambda *_: False, sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "pulumi preview still may not read Kubernetes objects after 30s" in message
    assert "Azure Kubernetes Service RBAC Reader" in message and "\n" not in message


def test_add_on_kinds_are_polled_until_the_cluster_serves_them():
    served = {"podmonitors.azmonitoring.coreos.com": iter([False, True, True]),
              "scaledobjects.keda.sh": iter([True, True, True])}
    clock = Clock()
    result = preflight.wait_for_crds(AKS, list(served), login=lambda _: ENTRA,
                                     established=lambda _user, name: next(served[name]),
                                     sleep=clock.sleep, clock=clock)
    assert result == AKS and clock.now == preflight.ACCESS_POLL_SECONDS


def test_an_add_on_kind_that_never_comes_stops_with_one_line_naming_it():
    clock = Clock()
    with pytest.raises(pulumi.RunError) as error:
        preflight.wait_for_crds(AKS, ["scaledobjects.keda.sh"], timeout=30, interval=15, login=lambda _: ENTRA,
                                established=lambda *_: False, sleep=clock.sleep, clock=clock)
    message = str(error.value)
    assert "does not serve scaledobjects.keda.sh after 30s" in message and "KEDA" in message
    assert "\n" not in message


ESTABLISHED = json.dumps({"status": {"conditions": [{"type": "Established", "status": "True"}]}}).encode()
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"


@pytest.fixture
def crd_server():
    """A stand-in API server that knows one established CRD."""
    class Handler(QuietHandler):
        def do_GET(self):
            if self.path != CRD_PATH + "podmonitors.azmonitoring.coreos.com":
                self.reply(404)
                return
            self.reply(200, ESTABLISHED)

    with serving(Handler) as server:
        yield plain(server)


def test_a_served_crd_is_established_and_an_unknown_one_is_not(crd_server):
    assert preflight.crd_established(crd_server, "podmonitors.azmonitoring.coreos.com") is True
    assert preflight.crd_established(crd_server, "scaledobjects.keda.sh") is False


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, an API server certificate for 127.0.0.1 and an admin client certificate (the test cluster's)."""
    return make_pki(tmp_path_factory.mktemp("pki"), "10.0.0.1", "kueue", "jobset")


@pytest.fixture
def tls_api_server(pki):
    """A stand-in API server over TLS that, like AKS with local accounts, requires a client certificate its CA
    signed, and serves one established CRD."""
    users = []

    class Handler(QuietHandler):
        def do_GET(self):
            users.append(dict(x[0] for x in self.connection.getpeercert()["subject"])["commonName"])
            self.reply(200 if self.path == CRD_PATH + "podmonitors.azmonitoring.coreos.com" else 404, ESTABLISHED)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
    context.load_verify_locations(pki / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with running(server):
        yield f"https://127.0.0.1:{server.server_address[1]}", users


def test_a_local_account_waits_for_add_on_kinds_authenticated_by_its_client_certificate(pki, tls_api_server):
    url, users = tls_api_server
    ca, cert, key = ((pki / name).read_text() for name in ("ca.crt", "admin.crt", "admin.key"))
    kubeconfig = admin_kubeconfig(url, ca, cert, key)
    assert preflight.wait_for_crds(kubeconfig, ["podmonitors.azmonitoring.coreos.com"]) == kubeconfig
    assert users == ["kubernetes-admin"]
    no_certificate = preflight.Credentials(url, ca_pem=ca, token="static-admin-token")
    # Under TLS 1.3 the server refuses the missing certificate after the client's handshake ends; where its close
    # overtakes the alert, the client reads an EOF (SSLEOFError, waited on as a server still starting) and asks again.
    clock = Clock()
    with pytest.raises(pulumi.RunError, match="refused a read of CustomResourceDefinitions"):
        preflight.wait_for_crds(kubeconfig, ["podmonitors.azmonitoring.coreos.com"], login=lambda _: no_certificate,
                                sleep=clock.sleep, clock=clock)


@pytest.fixture
def settling_api_server():
    """A stand-in for a brand-new API server: it throttles, fails and restarts before it answers."""
    answers = []

    class Handler(QuietHandler):
        def do_GET(self):
            status = answers.pop(0) if answers else 200
            if status == 0:  # the server goes away mid-request
                self.close_connection = True
                return
            self.reply(status, ESTABLISHED if status == 200 else b"{}")

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            status = answers.pop(0) if answers else 201
            self.reply(status, json.dumps({"status": {"allowed": True}}).encode() if status == 201 else b"{}")

    with serving(Handler) as server:
        yield plain(server), answers


def test_a_settling_api_server_is_waited_for_not_fatal(settling_api_server):
    user, answers = settling_api_server
    answers.extend([429, 503, 0, 500])
    clock = Clock()
    assert preflight.wait_for_crds(AKS, ["podmonitors.azmonitoring.coreos.com"], login=lambda _: user,
                                   sleep=clock.sleep, clock=clock) == AKS
    assert clock.now == 4 * preflight.ACCESS_POLL_SECONDS and not answers
    answers.extend([502, 504])
    entra = preflight.Credentials(user.server, token="good", entra=True)
    assert preflight.wait_for_access(AKS, login=lambda _: entra, sleep=clock.sleep, clock=clock) == AKS
    assert not answers


@pytest.mark.parametrize("error", [
    urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
    urllib.error.URLError(TimeoutError("timed out")), TimeoutError("The read operation timed out"),
    urllib.error.URLError(socket.gaierror(-2, "Name or service not known")),
    urllib.error.HTTPError("https://aks-x/apis", 429, "Too Many Requests", None, None)])
def test_a_transient_error_counts_as_not_yet_until_the_deadline_which_names_it(error):
    def failing(*_):
        raise error
    clock = Clock()
    with pytest.raises(pulumi.RunError) as raised:
        preflight.wait_for_crds(AKS, ["scaledobjects.keda.sh"], timeout=30, interval=15, login=lambda _: ENTRA,
                                established=failing, sleep=clock.sleep, clock=clock)
    assert clock.now == 30 and "its API server does not answer" in str(raised.value)
    clock = Clock()
    with pytest.raises(pulumi.RunError, match="still does not answer after 30s"):
        preflight.wait_for_access(AKS, timeout=30, interval=15, login=lambda _: ENTRA, allowed=failing,
                                  sleep=clock.sleep, clock=clock)


@pytest.mark.parametrize("error", [
    urllib.error.HTTPError("https://aks-x/apis", 400, "Bad Request", None, None),
    urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed"))])
def test_an_error_waiting_does_not_cure_stops_at_once_in_one_line(error):
    def failing(*_):
        raise error
    clock = Clock()
    with pytest.raises(pulumi.RunError) as raised:
        preflight.wait_for_crds(AKS, ["scaledobjects.keda.sh"], login=lambda _: ENTRA, established=failing,
                                sleep=clock.sleep, clock=clock)
    assert clock.now == 0 and str(raised.value).startswith("the AKS API server refused a read of") \
        and "\n" not in str(raised.value)


def test_the_stack_waits_for_the_add_on_kinds_it_writes_and_those_its_scenario_needs():
    from program.layers.azure import add_on_crds
    from program.needs import Needs
    from tests.helpers import load

    assert add_on_crds(load({}), Needs(autoscaled=True)) == (
        "podmonitors.azmonitoring.coreos.com", "scaledobjects.keda.sh", "triggerauthentications.keda.sh")
    assert add_on_crds(load({}), Needs()) == ("podmonitors.azmonitoring.coreos.com",)  # nothing scaled, no KEDA kinds
    assert add_on_crds(load({"monitoring": {"enabled": False}, "addons": {"keda": False}}),
                       Needs(add_on_kinds=("workspaces.kaito.sh",))) == ("workspaces.kaito.sh",)


def test_a_server_that_closes_mid_handshake_is_waited_for_not_fatal():
    """A starting API server or load balancer that accepts and then closes during the TLS handshake raised
    SSLEOFError, which counted as a TLS refusal and stopped pulumi up at once."""
    listener = socket.create_server(("127.0.0.1", 0))

    def close_after_client_hello():
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)
    closer = threading.Thread(target=close_after_client_hello, daemon=True)
    closer.start()
    user = preflight.Credentials(f"https://127.0.0.1:{listener.getsockname()[1]}")
    with listener, pytest.raises(urllib.error.URLError) as raised:
        preflight._call(user, CRD_PATH + "scaledobjects.keda.sh")
    closer.join(5)
    assert isinstance(raised.value.reason, ssl.SSLEOFError) and preflight.transient(raised.value)


@pytest.mark.parametrize("reason", ["TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_BAD_CERTIFICATE",
                                    "TLSV1_ALERT_UNKNOWN_CA"])
def test_a_client_certificate_the_server_refuses_is_not_waited_for(reason):
    error = ssl.SSLError(1, reason)
    error.reason = reason
    assert not preflight.transient(urllib.error.URLError(error))


def test_a_client_key_that_does_not_load_is_one_line(pki):
    ca, cert = (pki / "ca.crt").read_text(), (pki / "admin.crt").read_text()
    other_key = (pki / "apiserver.key").read_text()
    user = preflight.Credentials("https://127.0.0.1:9", ca_pem=ca, client_cert=(cert, other_key))
    with pytest.raises(pulumi.RunError, match="^the kubeconfig's client certificate and key do not load: ") as raised:
        preflight._call(user, "/version")
    assert "\n" not in str(raised.value)

"""The private-cluster reachability check, against real sockets on this machine."""

from __future__ import annotations

import socket

import pulumi
import pytest

from components.kubernetes import reachability

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: aks
  cluster: {server: "https://%s:%d"}
"""


def test_a_name_that_does_not_resolve_is_reported_with_the_private_dns_reason():
    problem = reachability.api_server_problem("aks-x.privatelink.eastus.azmk8s.invalid")
    assert "does not resolve here" in problem and "private DNS zone" in problem


def test_an_open_port_is_reachable_and_a_closed_one_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert reachability.api_server_problem("127.0.0.1", port, timeout=2) is None
    assert "does not answer" in reachability.api_server_problem("127.0.0.1", port, timeout=2)


def test_the_server_comes_from_the_kubeconfig():
    host = "aks-x.hcp.eastus.azmk8s.io"
    assert reachability.server_of(KUBECONFIG % (host, 443)) == (host, 443)


def test_an_unreachable_private_server_stops_the_deployment_with_one_line():
    with pytest.raises(pulumi.RunError) as error:
        reachability.require_reachable(KUBECONFIG % ("aks-x.privatelink.eastus.azmk8s.invalid", 443))
    message = str(error.value)
    assert message.startswith("private AKS API server unreachable from this machine:")
    assert "self-hosted runner in the cluster's VNet" in message and "\n" not in message

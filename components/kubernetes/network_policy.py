"""NetworkPolicies: a workload namespace denies all traffic but DNS, and each workload opens what it uses.

The cluster enforces them with its network policy engine (Cilium or Calico, ``cluster.networkPolicy``). Policies
add up: a pod may send or receive what any policy selecting it allows. ``kubectl port-forward`` enters the pod
through the kubelet, not the pod network, so it works whatever the policies say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_kubernetes import networking

DNS = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
"""Egress to the cluster's CoreDNS (AKS labels its pods ``k8s-app: kube-dns``)."""
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")
"""Left out of internet egress: the VNet, pods and services, the instance metadata endpoint (169.254.169.254,
which hands out the node's identity tokens) and carrier-grade NAT space."""


def _policy(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
            spec: Mapping[str, Any], parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    return networking.v1.NetworkPolicy(
        resource_name,
        metadata={"name": name, "namespace": namespace},
        spec={"podSelector": {"matchLabels": dict(pods)} if pods else {}, **spec},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def deny_all_but_dns(resource_name: str, namespace: pulumi.Input[str], parent: pulumi.Resource
                     ) -> networking.v1.NetworkPolicy:
    """Every pod of ``namespace``: no ingress, egress only to DNS. Ingress is denied by naming it in policyTypes with
    no rule; an explicit ``ingress: []`` the API server stores as absent, so every apply would bump the policy's
    generation and Pulumi would show it changed on every preview (found on the test control plane)."""
    return _policy(resource_name, "default-deny", namespace, {},
                   {"policyTypes": ["Ingress", "Egress"], "egress": [DNS]}, parent)


def allow_ingress(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                  port: int | str, parent: pulumi.Resource, from_pods: Mapping[str, str] | None = None
                  ) -> networking.v1.NetworkPolicy:
    """TCP ``port`` into ``pods`` from pods of the namespace labelled ``from_pods`` (``{}``: any of them), or from
    anywhere, load balancer clients included, when ``from_pods`` is None."""
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": port}]}
    if from_pods is not None:
        rule["from"] = [{"podSelector": {"matchLabels": dict(from_pods)} if from_pods else {}}]
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Ingress"], "ingress": [rule]}, parent)


def allow_egress_to_pods(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                         to_pods: Sequence[Mapping[str, str]], port: int | str, parent: pulumi.Resource
                         ) -> networking.v1.NetworkPolicy:
    """TCP ``port`` from ``pods`` to the namespace's pods matching any of ``to_pods`` (through their Services)."""
    rule = {"to": [{"podSelector": {"matchLabels": dict(p)}} for p in to_pods],
            "ports": [{"protocol": "TCP", "port": port}]}
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Egress"], "egress": [rule]}, parent)


def allow_egress_to_namespace(resource_name: str, name: str, namespace: pulumi.Input[str],
                              pods: Mapping[str, str], to_namespace: pulumi.Input[str], to_pods: Mapping[str, str],
                              port: int, parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    """TCP ``port`` from ``pods`` to the pods of another namespace labelled ``to_pods``."""
    rule = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": to_namespace}},
                    "podSelector": {"matchLabels": dict(to_pods)}}],
            "ports": [{"protocol": "TCP", "port": port}]}
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Egress"], "egress": [rule]}, parent)


def allow_within(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                 parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    """Any TCP between ``pods`` and each other, both ways: the processes of one distributed run (torchrun's
    rendezvous on a fixed port, then NCCL's and gloo's bootstrap sockets on ports each process picks)."""
    peers = [{"podSelector": {"matchLabels": dict(pods)}}]
    return _policy(resource_name, name, namespace, pods, {
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": peers, "ports": [{"protocol": "TCP"}]}],
        "egress": [{"to": peers, "ports": [{"protocol": "TCP"}]}]}, parent)


def allow_https_to_internet(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                            parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    """HTTPS from ``pods`` to public addresses only (never the VNet, other pods or the metadata endpoint)."""
    rule = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_RANGES)}}],
            "ports": [{"protocol": "TCP", "port": 443}]}
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Egress"], "egress": [rule]}, parent)


def allow_api_server(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                     parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    """HTTPS from ``pods`` to the Kubernetes API server. Policies see the address after the ``kubernetes`` Service
    is translated: AKS's API server answers on 443 at a public address, or a private one in the VNet for a private
    cluster, neither known before the cluster exists, so the rule is port 443 to any address."""
    rule = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Egress"], "egress": [rule]}, parent)


METRICS_SCRAPER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                   "podSelector": {"matchLabels": {"rsName": "ama-metrics"}}}
"""The managed Prometheus add-on's replica pods, which scrape PodMonitor targets (its per-node DaemonSet scrapes
only the default node targets)."""


def allow_scraping(resource_name: str, name: str, namespace: pulumi.Input[str], pods: Mapping[str, str],
                   port: int | str, parent: pulumi.Resource) -> networking.v1.NetworkPolicy:
    """TCP ``port`` into ``pods`` from the managed Prometheus collector, so a PodMonitor's target is reachable."""
    rule = {"from": [METRICS_SCRAPER], "ports": [{"protocol": "TCP", "port": port}]}
    return _policy(resource_name, name, namespace, pods, {"policyTypes": ["Ingress"], "ingress": [rule]}, parent)

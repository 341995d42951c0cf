"""NetworkPolicies: every workload namespace denies all but DNS, and each workload reaches exactly what it uses.

``allowed`` evaluates the rendered policies the way Kubernetes does (a pod with no policy selecting it for a
direction is open; otherwise any selecting policy's rule must match peer and port), so the tests ask questions
about traffic instead of restating the policy objects.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from offline.report import is_manifest, manifest
from tests.helpers import jobset_pods, jobset_templates

WORKLOADS = {"Job", "CronJob", "Deployment", "DaemonSet"}
KUBE_DNS = ("kube-system", {"k8s-app": "kube-dns"})
IMDS = "169.254.169.254"
PUBLIC = "203.0.113.10"
VNET = "10.20.4.4"
API_CLIENTS = {"gpu-node-repair"}
"""Pods that call the Kubernetes API server: a private cluster's is in the VNet, so they reach it on 443 only."""


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict
    ports: dict
    """Named container ports → numbers."""


def objects(render, kind):
    return [manifest(r) for r in render.resources if is_manifest(r) and manifest(r)["kind"] == kind]


def pods(render) -> dict[str, Pod]:
    found = {}
    for kind in WORKLOADS:
        for obj in objects(render, kind):
            spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
            template = spec["template"]
            ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
                     if "name" in p}
            found[obj["metadata"]["name"]] = Pod(obj["metadata"]["namespace"], template["metadata"]["labels"], ports)
    for name, jobset in jobset_templates(render).items():
        for template in jobset_pods(jobset):
            found[name] = Pod(jobset["metadata"]["namespace"], template["metadata"]["labels"], {})
    return found


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _port_matches(rule_ports, port: int, protocol: str, target: Pod | None) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        number = p.get("port")
        if isinstance(number, str):
            number = (target.ports if target else {}).get(number)
        if p.get("protocol", "TCP") == protocol and (number is None or number == port):
            return True
    return False


def _peer_matches(peer: dict, policy_namespace: str, other) -> bool:
    if "ipBlock" in peer:
        if not isinstance(other, str):
            return False
        address = ipaddress.ip_address(other)
        block = peer["ipBlock"]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except", []))
    if isinstance(other, str):
        return False
    namespace, labels = other
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace}):
            return False
    elif namespace != policy_namespace:
        return False
    return _selects(peer.get("podSelector", {}), labels)


def _direction_allows(policies, pod: Pod, direction: str, other, port: int, protocol: str, target: Pod | None):
    selecting = [p for p in policies if p["metadata"]["namespace"] == pod.namespace
                 and _selects(p["spec"]["podSelector"], pod.labels)
                 and direction in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if (peers is None or any(_peer_matches(peer, pod.namespace, other) for peer in peers)) and \
                    _port_matches(rule.get("ports"), port, protocol, target):
                return True
    return False


def allowed(render, source, destination, port: int, protocol: str = "TCP") -> bool:
    """Whether ``source`` (a workload name, or an IP outside the cluster) may reach ``destination`` (a workload
    name, an IP, or ``KUBE_DNS``) on ``port``."""
    policies = objects(render, "NetworkPolicy")
    workloads = pods(render)
    src = workloads.get(source) if isinstance(source, str) else None
    dst = workloads.get(destination) if isinstance(destination, str) else None
    src_peer = (src.namespace, src.labels) if src else source
    dst_peer = (dst.namespace, dst.labels) if dst else destination
    if src and not _direction_allows(policies, src, "Egress", dst_peer, port, protocol, dst):
        return False
    return not dst or _direction_allows(policies, dst, "Ingress", src_peer, port, protocol, dst)


ADD_ON_NAMESPACES = {"kueue-system", "jobset-system"}
"""Restricted, but no default-deny: the API server calls the add-on's admission webhook from outside the pod
network, and the controller calls the API server."""


def test_every_workload_namespace_denies_all_traffic_but_dns(render_of, renders):
    for stack in renders:
        r = render_of(stack)
        # Workload namespaces: restricted ones, and the one baseline exception (pods KAITO writes).
        workloads = {ns["metadata"]["name"] for ns in objects(r, "Namespace")
                      if (ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted"
                          or "security-exception" in ns["metadata"]["labels"])
                      and ns["metadata"]["name"] not in ADD_ON_NAMESPACES}
        deny = {p["metadata"]["namespace"]: p["spec"] for p in objects(r, "NetworkPolicy")
                if p["metadata"]["name"] == "default-deny"}
        assert workloads and set(deny) == workloads
        for spec in deny.values():
            assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
        for name, pod in pods(r).items():
            if pod.namespace in workloads:
                assert allowed(r, name, KUBE_DNS, 53, "UDP") and allowed(r, name, KUBE_DNS, 53, "TCP"), name
                assert not allowed(r, name, IMDS, 80), f"{name} must not reach the node's identity endpoint"
                if name in API_CLIENTS:
                    assert allowed(r, name, VNET, 443) and not allowed(r, name, VNET, 80), name
                else:
                    assert not allowed(r, name, VNET, 443), f"{name} must not reach the VNet"


"""NetworkPolicies: every workload namespace denies all but DNS, and each workload reaches exactly what it uses.

``allowed`` evaluates the rendered policies the way Kubernetes does (a pod with no policy selecting it for a
direction is open; otherwise any selecting policy's rule must match peer and port), so the tests ask questions
about traffic instead of restating the policy objects.
"""

from __future__ import annotations

import pytest

from tests.helpers import IMDS, KUBE_DNS, STACKS, VNET, allowed, manifests_of, pods

API_CLIENTS = {"gpu-node-repair", "gpu-node-gate"}
"""Pods that call the Kubernetes API server: a private cluster's is in the VNet, so they reach it on 443 only."""


ADD_ON_NAMESPACES = {"kueue-system", "jobset-system"}
"""Restricted, but no default-deny: the API server calls the add-on's admission webhook from outside the pod
network, and the controller calls the API server."""


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_namespace_denies_all_traffic_but_dns(stack, render_of):
    r = render_of(stack)
    # Workload namespaces: restricted ones, and the one baseline exception (pods KAITO writes).
    workloads = {ns["metadata"]["name"] for ns in manifests_of(r, "Namespace")
                  if (ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted"
                      or "security-exception" in ns["metadata"]["labels"])
                  and ns["metadata"]["name"] not in ADD_ON_NAMESPACES}
    deny = {p["metadata"]["namespace"]: p["spec"] for p in manifests_of(r, "NetworkPolicy")
            if p["metadata"]["name"] == "default-deny"}
    assert workloads and set(deny) == workloads
    for spec in deny.values():
        assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in spec
    for name, pod in pods(r).items():
        if pod.namespace in workloads:
            assert allowed(r, name, KUBE_DNS, 53, "UDP") and allowed(r, name, KUBE_DNS, 53, "TCP"), name
            assert not allowed(r, name, IMDS, 80), f"{name} must not reach the node's identity endpoint"
            if name in API_CLIENTS:
                assert allowed(r, name, VNET, 443) and not allowed(r, name, VNET, 80), name
            else:
                assert not allowed(r, name, VNET, 443), f"{name} must not reach the VNet"

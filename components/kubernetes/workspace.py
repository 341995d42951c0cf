"""A namespace for a scenario's workloads, under the restricted Pod Security Standard."""

from __future__ import annotations

import pulumi

from components.kubernetes.security import workload_namespace


class Workspace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """The namespace, as an output: objects placed in it wait for it."""
    name: str
    """The same namespace as a plain name, for commands a stack outputs."""

    def __init__(self, name: str, namespace_name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:k8s:Workspace", name, None, opts)
        ns = workload_namespace(f"{name}-ns", namespace_name, self)
        self.namespace = ns.metadata["name"]
        self.name = namespace_name
        self.register_outputs({"namespace": self.namespace})

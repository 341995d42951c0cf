"""A namespace for a scenario's workloads, under the restricted Pod Security Standard (or a stated exception)."""

from __future__ import annotations

import pulumi

from components.kubernetes.security import workload_namespace
from stackconfig.schema import SecurityException


class Workspace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """The namespace, as an output: objects placed in it wait for it."""
    name: str
    """The same namespace as a plain name, for commands a stack outputs."""

    def __init__(self, name: str, namespace_name: str, opts: pulumi.ResourceOptions | None = None,
                 exception: SecurityException | None = None):
        """``exception``: a namespace at baseline Pod Security, for pods an operator writes (``workload_namespace``)."""
        super().__init__("aksgpu:k8s:Workspace", name, None, opts)
        ns = workload_namespace(f"{name}-ns", namespace_name, self, exception)
        self.namespace = ns.metadata["name"]
        self.name = namespace_name
        self.register_outputs({"namespace": self.namespace})

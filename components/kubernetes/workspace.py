"""A namespace for a scenario's workloads, under the restricted Pod Security Standard (or a stated exception)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.kubernetes.security import workload_namespace
from components.vocabulary import SecurityException


@dataclass(frozen=True)
class WorkspaceArgs:
    namespace: str
    """The namespace's name."""
    exception: SecurityException | None = None
    """A namespace at baseline Pod Security, for pods an operator writes (``workload_namespace``)."""


class Workspace(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    """The namespace, as an output: objects placed in it wait for it."""
    name: str
    """The same namespace as a plain name, for commands a stack outputs."""

    def __init__(self, name: str, args: WorkspaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:k8s:Workspace", name, None, opts)  # frozen: components/__init__.py
        ns = workload_namespace(f"{name}-ns", args.namespace, self, args.exception)
        self.namespace = ns.metadata["name"]
        self.name = args.namespace
        self.register_outputs({"namespace": self.namespace})

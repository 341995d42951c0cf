"""What runs with no cloud, Pulumi CLI or credentials: the render of every stack under Pulumi mocks, its report,
estimates and diff, the generated docs and a new stack file (``python -m offline``)."""

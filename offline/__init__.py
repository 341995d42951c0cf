"""Offline tooling: the render under Pulumi mocks, its report and estimates, and the lifecycle workflows'
helpers, all behind one command line (``python -m offline``)."""

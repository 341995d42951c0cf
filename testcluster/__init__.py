"""A Kubernetes control plane for integration tests, built from pinned Go modules (see README.md)."""

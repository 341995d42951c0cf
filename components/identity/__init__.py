"""Identities of workloads: a user-assigned managed identity per workload that touches data, federated with its
Kubernetes ServiceAccount (AKS workload identity)."""

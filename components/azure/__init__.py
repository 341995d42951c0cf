"""Azure resources: network, private link, the AKS cluster and its pools, registry, storage, role assignments."""

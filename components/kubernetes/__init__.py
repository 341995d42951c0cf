"""Access to the cluster (provider, kubeconfig) and the builders every Kubernetes object of this project uses."""

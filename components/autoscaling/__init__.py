"""Scaling GPU workloads on what the GPUs do: KEDA (the AKS add-on) reading managed Prometheus, and Kueue queueing
Job fan-outs within the GPU pools' capacity."""

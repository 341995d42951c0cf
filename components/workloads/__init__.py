"""Each scenario's workloads: the GPU function, shared inference, training, re-simulation."""

"""In-cluster GPU software: Node Feature Discovery, the NVIDIA GPU operator, GPU sharing, the smoke test."""

"""Seeing the GPUs: Azure Monitor managed Prometheus scraping the DCGM exporter, GPU alert rules, Grafana, and the
cluster autoscaler's logs."""

"""Distributed training engines the platform installs for scenarios that ask (``Needs.job_sets``)."""

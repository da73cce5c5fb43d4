"""Clients of a cluster: producer, consumer, groups and the browse service."""

"""kafka-python's `kafka.coordinator.assignors.sticky` (see `.sticky_assignor`)."""

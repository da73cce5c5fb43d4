"""kafka-python's `kafka.coordinator`: here only its partition assignors (`.assignors`),
which a program names in `partition_assignment_strategy`. The group coordination itself
is the engine's (engine.client.groups)."""

"""Request handlers, one module per API family; each registers itself in engine.wire.registry."""

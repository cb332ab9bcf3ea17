"""The gRPC transport: servicer, status mapping, and server wiring (health, reflection)."""

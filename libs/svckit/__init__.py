"""The one small library every Cograph service shares: config, database, gRPC, telemetry."""

"""Plain text helpers shared by generation and rewards (nothing here imports another aerorl_ops package)."""

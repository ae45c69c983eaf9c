"""Plain text helpers shared by generation, rewards and reports (nothing here imports another aerorl_ops package)."""

"""The low-level RL agents of HIRO (DDPG, TD3), their networks and replay buffer."""

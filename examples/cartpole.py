"""A CartPole environment in NumPy with gym's CartPole-v1 dynamics and interface
(``reset(seed=...) -> (state, info)``, ``step(action) -> (state, reward, terminated,
truncated, info)``, ``spec.reward_threshold``), for the reinforcement-learning examples:
gym is not a dependency."""
import math
from types import SimpleNamespace

import numpy as np


class CartPoleEnv:
    """A pole hinged on a cart; push the cart left (0) or right (1) to keep the pole up.
    Reward 1 per step; the episode ends when the pole leans past 12 degrees or the cart leaves
    [-2.4, 2.4], and is truncated after 500 steps."""
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    spec = SimpleNamespace(id="CartPole-v1", reward_threshold=475.0, max_episode_steps=500)

    def __init__(self):
        self.np_random = np.random.default_rng()
        self.state = None
        self.steps = 0

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return self.state.astype(np.float32), {}

    def step(self, action):
        if action not in (0, 1):
            raise ValueError(f"CartPole action must be 0 or 1, got {action!r}")
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sin) / total_mass
        thetaacc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos ** 2 / total_mass))
        xacc = temp - polemass_length * thetaacc * cos / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold_radians)
        truncated = self.steps >= self.spec.max_episode_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated, {}

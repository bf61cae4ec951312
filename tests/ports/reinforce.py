"""pytorch/examples `reinforcement_learning/reinforce.py`, ported to dagc (a tiny deterministic environment).

Kept as the original writes it: the options parsed at module level (`args = parser.parse_args()`), a
module-level environment seeded with `env.reset(seed=args.seed)`, `torch.manual_seed(args.seed)`, a
module-level `policy` (a `Policy` with dropout that keeps `saved_log_probs` and `rewards`) and its Adam
`optimizer`, `eps`, `select_action(state)` sampling from a `Categorical`, `finish_episode()` computing the
discounted returns and stepping the optimizer, and in `main()` the loop over episodes with the running
reward, the log every `log_interval` episodes and the stop once the running reward passes
`env.spec.reward_threshold`.
Changed: a pipeline body calls no methods of the environment, so one episode (`env.reset()`, then
`select_action` and `env.step` until the episode ends) is the task `run_episode(env)`; the environment is
`Corridor`, a small deterministic stand-in for CartPole (the same `reset`/`step`/`spec` interface); the
pipeline reads `log_interval` as a parameter (it cannot read module-level `args`); the episodes are
`range(1, MAX_EPISODES + 1)` where the original counts them without end, and `main` returns the running
reward and the episodes' rewards. The original's `count(1)` (with a budget) and `run_episode()` stepping
the global `env` are the forms tests/test_training_ports.py AS_WRITTEN compiles.
"""

import argparse
import types
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

import dagc

parser = argparse.ArgumentParser(description='PyTorch REINFORCE example')
parser.add_argument('--gamma', type=float, default=0.99, metavar='G',
                    help='discount factor (default: 0.99)')
parser.add_argument('--seed', type=int, default=543, metavar='N',
                    help='random seed (default: 543)')
parser.add_argument('--render', action='store_true',
                    help='render the environment')
args = parser.parse_args()
MAX_EPISODES = 8  # the loop's budget: it stops there if the running reward never passes the threshold


class Corridor:
    """A cart on a line: action 1 pushes it right, 0 left; the episode ends when it leaves [-0.6, 0.6] or after
    `max_steps` steps. Rewards 1 per step, as CartPole does."""

    def __init__(self, max_steps=30):
        self.spec = types.SimpleNamespace(id='Corridor-v0', reward_threshold=13.0, max_episode_steps=max_steps)
        self.max_steps = max_steps
        self.rng = np.random.default_rng(0)
        self.state = np.zeros(4, dtype=np.float32)
        self.steps = 0

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, size=4).astype(np.float32)
        self.steps = 0
        return self.state, {}

    def step(self, action):
        x, v, a, w = (float(s) for s in self.state)
        force = 0.3 if action == 1 else -0.3
        v = v + force - 0.5 * a
        x = x + 0.2 * v
        a = a + 0.3 * v
        w = w + 0.1 * a
        self.state = np.array([x, v, a, w], dtype=np.float32)
        self.steps += 1
        terminated = abs(x) > 0.6 or abs(a) > 1.0
        truncated = self.steps >= self.max_steps
        return self.state, 1.0, terminated, truncated, {}

    def render(self):
        print(self.state)


env = Corridor()
env.reset(seed=args.seed)
torch.manual_seed(args.seed)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 16)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(16, 2)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


@dagc.task
def run_episode(env):
    state, _ = env.reset()
    ep_reward = 0
    for t in range(1, 10000):  # noqa: B007 - Don't infinite loop while learning
        action = select_action(state)
        state, reward, terminated, truncated, _ = env.step(action)
        if args.render:
            env.render()
        policy.rewards.append(reward)
        ep_reward += reward
        if terminated or truncated:
            break
    return ep_reward, t


@dagc.task
def finish_episode():
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]


@dagc.pipeline
def main(log_interval=2):
    running_reward = 10
    rewards = []
    for i_episode in range(1, MAX_EPISODES + 1):
        ep_reward, t = run_episode(env)
        rewards.append(ep_reward)
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode()
        if i_episode % log_interval == 0:
            print(f'Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}')
        if running_reward > env.spec.reward_threshold:
            print(f"Solved! Running reward is now {running_reward} and the last episode runs to {t} time steps!")
            break
    return running_reward, rewards


if __name__ == '__main__':
    main()

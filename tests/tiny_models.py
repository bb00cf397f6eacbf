"""Small torch models that tests build and script themselves (never downloaded): a working one,
and models that raise, hang, exhaust memory or run slowly, to exercise job sandboxes."""

import torch


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x))


class Raises(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 0:
            raise RuntimeError("model bug: division by zero in layer 3")
        return x


class Hangs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        i = 0
        while i >= 0:  # forever
            y = torch.tanh(y)
            i += 1
        return y


class Hogs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.ones([1 << 33], dtype=torch.float32)  # 32 GiB
        return x + big.sum()


class Slow(torch.nn.Module):
    """About `steps` small matmuls per item: a job that lasts seconds (for kill tests)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        torch.manual_seed(1)
        self.w = torch.nn.Parameter(torch.randn(256, 256) / 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.repeat(1, 32)
        for _ in range(self.steps):
            y = torch.tanh(y @ self.w)
        return y[:, :4]

# Records a training loop's print() of a dict of PyTorch tensors and numpy scalars.
import numpy as np
import torch
torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
x = torch.randn(32, 3); y = x @ torch.tensor([1.0, -2.0, 0.5])
opt = torch.optim.SGD([w], lr=0.1)
for step in range(4):
    loss = ((x @ w - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print({'step': step, 'loss': loss.detach(), 'w0': w[0].detach(), 'lr': np.float32(0.1), 'nan_check': float('nan') if step == 3 else 0.0})

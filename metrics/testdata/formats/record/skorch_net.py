# Records skorch's NeuralNetClassifier epoch table.
import numpy as np
import torch
from skorch import NeuralNetClassifier
torch.manual_seed(0)
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 8)).astype(np.float32); y = (X[:, 0] > 0).astype(np.int64)
net = NeuralNetClassifier(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
                          criterion=torch.nn.CrossEntropyLoss, max_epochs=4, lr=0.1)
net.fit(X, y)

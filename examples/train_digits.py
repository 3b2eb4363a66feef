"""Train a small CNN on the bundled UCI digits with plain PyTorch-style code.

Run: python examples/train_digits.py  (swap `import ember as torch` for `import torch` and the
same script runs on PyTorch, apart from the bundled data loader).
"""
import ember as torch
from ember import nn, optim
from ember.datasets import load_digits
from ember.utils.data import DataLoader, TensorDataset, random_split


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def main():
    torch.manual_seed(0)
    images, labels = load_digits(as_tensors=True)
    data = TensorDataset(images.unsqueeze(1), labels)
    train, test = random_split(data, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train, batch_size=32, shuffle=True)
    test_loader = DataLoader(test, batch_size=256)
    model = Net()
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    for epoch in range(8):
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                correct += int((model(x).argmax(1) == y).sum())
        print(f"epoch {epoch + 1}: last loss {loss.item():.4f}, test accuracy "
              f"{correct / len(test):.4f}")
    torch.save(model.state_dict(), "digits_cnn.safetensors")
    print("saved digits_cnn.safetensors")


if __name__ == "__main__":
    main()

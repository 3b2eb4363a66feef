"""The PyTorch variational auto-encoder example (pytorch/examples vae/main.py): a 784-400-20
encoder giving mean and log-variance, the reparameterization trick, a 20-400-784 decoder, and
the binary cross-entropy plus KL-divergence loss, trained with Adam. The program is
PyTorch's; only the import block differs, the data are the bundled UCI digits scaled up to
28x28 (no torchvision or MNIST), and images are written as PGM files (no torchvision
save_image).

Run: python examples/vae.py --epochs 5
     EXAMPLE_BACKEND=torch python examples/vae.py --epochs 5
"""
import argparse
import os

import numpy as np

if os.environ.get("EXAMPLE_BACKEND") == "torch":
    import torch
else:
    import ember as torch
nn, F, optim = torch.nn, torch.nn.functional, torch.optim
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset


def save_image(tensor, path, nrow=8):
    """A grid of (N, 1, H, W) images in [0, 1] written as a binary PGM file."""
    images = tensor.detach().numpy()[:, 0]
    n, h, w = images.shape
    rows = -(-n // nrow)
    grid = np.zeros((rows * h, nrow * w))
    for k in range(n):
        r, c = divmod(k, nrow)
        grid[r * h:(r + 1) * h, c * w:(c + 1) * w] = images[k]
    pixels = (np.clip(grid, 0, 1) * 255).round().astype(np.uint8)
    with open(path + ".tmp", "wb") as f:
        f.write(b"P5 %d %d 255\n" % (pixels.shape[1], pixels.shape[0]) + pixels.tobytes())
    os.replace(path + ".tmp", path)


def mnist_like(train_size, test_size):
    """The UCI digits (8x8, 0..16) as 28x28 images in [0, 1] (transforms.ToTensor() of
    MNIST); a fixed shuffle split into train and test."""
    from ember.datasets import load_digits  # NumPy arrays: no framework involved
    images, labels = load_digits()
    images = np.pad(np.kron(images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2)))
    images = images.astype(np.float32)[:, None]
    order = np.random.default_rng(0).permutation(len(labels))
    tr, te = order[:train_size], order[len(order) - test_size:]
    mk = lambda i: TensorDataset(torch.from_numpy(images[i]),  # noqa: E731
                                 torch.from_numpy(labels[i].astype(np.int64)))
    return mk(tr), mk(te)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()

        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def main(argv=None):
    parser = argparse.ArgumentParser(description='VAE MNIST Example')
    parser.add_argument('--batch-size', type=int, default=128, metavar='N',
                        help='input batch size for training (default: 128)')
    parser.add_argument('--epochs', type=int, default=10, metavar='N',
                        help='number of epochs to train (default: 10)')
    parser.add_argument('--no-accel', action='store_true',
                        help='disables accelerator')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--train-size', type=int, default=1497,
                        help='training images taken from the digits (default: 1497)')
    parser.add_argument('--test-size', type=int, default=300,
                        help='test images taken from the digits (default: 300)')
    parser.add_argument('--results', type=str, default='results',
                        help='folder for the reconstructions and samples (default: results)')
    args = parser.parse_args(argv)

    use_accel = not args.no_accel and torch.accelerator.is_available()

    torch.manual_seed(args.seed)

    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    print(f"Using device: {device}")

    kwargs = {'num_workers': 1, 'pin_memory': True} if use_accel else {}
    train_set, test_set = mnist_like(args.train_size, args.test_size)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **kwargs)
    test_loader = DataLoader(test_set, batch_size=args.batch_size, shuffle=False, **kwargs)

    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    os.makedirs(args.results, exist_ok=True)

    def train(epoch):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(train_loader):
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), len(train_loader.dataset),
                    100. * batch_idx / len(train_loader),
                    loss.item() / len(data)))

        print('====> Epoch: {} Average loss: {:.4f}'.format(
              epoch, train_loss / len(train_loader.dataset)))

    def test(epoch):
        model.eval()
        test_loss = 0
        with torch.no_grad():
            for i, (data, _) in enumerate(test_loader):
                data = data.to(device)
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
                if i == 0:
                    n = min(data.size(0), 8)
                    comparison = torch.cat([data[:n],
                                            recon_batch.view(-1, 1, 28, 28)[:n]])
                    save_image(comparison.cpu(), os.path.join(
                        args.results, 'reconstruction_' + str(epoch) + '.pgm'), nrow=n)

        test_loss /= len(test_loader.dataset)
        print('====> Test set loss: {:.4f}'.format(test_loss))

    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20).to(device)
            sample = model.decode(sample).cpu()
            save_image(sample.view(64, 1, 28, 28),
                       os.path.join(args.results, 'sample_' + str(epoch) + '.pgm'))


if __name__ == "__main__":
    main()

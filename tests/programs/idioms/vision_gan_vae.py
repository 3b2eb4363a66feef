"""Generative vision training: a DCGAN (ConvTranspose2d with stride/output_padding, BatchNorm2d,
LeakyReLU, Tanh, BCEWithLogitsLoss, two Adam optimizers with betas=(0.5, 0.999), detach(),
requires_grad_(False) toggling) and a conv VAE (reparameterisation with NumPy eps,
binary_cross_entropy(reduction='sum'), KL term)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(7)
torch.set_default_dtype(torch.float64)
NZ, NGF, NDF = 8, 8, 8


def init_from_numpy(model, scale=0.1):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.01))
            elif p.dim() == 1:  # norm weights
                p.copy_(torch.from_numpy(1.0 + rng.standard_normal(tuple(p.shape)) * 0.02))
            else:
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),          # 1 -> 4
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 3, stride=2, padding=1, output_padding=1,
                               bias=False),                                  # 4 -> 8
            nn.BatchNorm2d(NGF),
            nn.ReLU(inplace=True),
            nn.ConvTranspose2d(NGF, 3, 4, 2, 1),                             # 8 -> 16
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, NDF, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
        )
        self.head = nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False)

    def forward(self, x):
        return self.head(self.features(x)).view(-1, 1).squeeze(1)


netG, netD = Generator(), Discriminator()
init_from_numpy(netG)
init_from_numpy(netD)
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real = torch.from_numpy(np.tanh(rng.standard_normal((8, 3, 16, 16))))
fixed_noise = torch.from_numpy(rng.standard_normal((4, NZ, 1, 1)))
d_losses, g_losses, dx, dgz = [], [], [], []
for step in range(4):
    noise = torch.from_numpy(rng.standard_normal((8, NZ, 1, 1)))
    # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
    for p in netD.parameters():
        p.requires_grad_(True)
    netD.zero_grad(set_to_none=True)
    label = torch.full((8,), 1.0)
    out_real = netD(real)
    errD_real = criterion(out_real, label)
    errD_real.backward()
    fake = netG(noise)
    label.fill_(0.0)
    out_fake = netD(fake.detach())
    errD_fake = criterion(out_fake, label)
    errD_fake.backward()
    optD.step()
    # (2) update G: maximize log(D(G(z))), D frozen
    for p in netD.parameters():
        p.requires_grad_(False)
    optG.zero_grad()
    out = netD(fake)
    errG = criterion(out, torch.ones_like(out))
    errG.backward()
    optG.step()
    d_losses.append((errD_real + errD_fake).item())
    g_losses.append(errG.item())
    dx.append(torch.sigmoid(out_real).mean().item())
    dgz.append(out.sigmoid().mean().item())
frozen_grads = all(p.grad is None for p in netD.parameters())
netG.eval()
with torch.no_grad():
    samples = netG(fixed_noise)
print("gan_d", " ".join(f"{v:.10f}" for v in d_losses))
print("gan_g", " ".join(f"{v:.10f}" for v in g_losses))
print("gan_prob", " ".join(f"{v:.10f}" for v in dx + dgz))
print("gan_samples", tuple(samples.shape), f"{samples.sum().item():.10f}",
      f"{samples.abs().max().item():.10f}", frozen_grads,
      f"{netG.main[1].running_mean.sum().item():.10f}",
      f"{netG.main[1].running_var.sum().item():.10f}", netG.main[1].num_batches_tracked.item())


class ConvVAE(nn.Module):
    def __init__(self, latent=6):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Flatten())
        self.fc_mu = nn.Linear(16 * 4 * 4, latent)
        self.fc_logvar = nn.Linear(16 * 4 * 4, latent)
        self.fc_dec = nn.Linear(latent, 16 * 4 * 4)
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1))

    def encode(self, x):
        h = self.enc(x)
        return self.fc_mu(h), self.fc_logvar(h)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h = F.relu(self.fc_dec(z)).view(-1, 16, 4, 4)
        return torch.sigmoid(self.dec(h))

    def forward(self, x, eps):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def vae_loss(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld, bce, kld


vae = ConvVAE()
init_from_numpy(vae, 0.2)
opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
images = torch.from_numpy(rng.random((8, 1, 16, 16)))
vae.train()
vae_stats = []
for step in range(4):
    eps = torch.from_numpy(rng.standard_normal((8, 6)))
    opt.zero_grad()
    recon, mu, logvar = vae(images, eps)
    loss, bce, kld = vae_loss(recon, images, mu, logvar)
    (loss / images.size(0)).backward()
    opt.step()
    vae_stats += [loss.item(), kld.item()]
vae.eval()
with torch.no_grad():
    z = torch.from_numpy(rng.standard_normal((3, 6)))
    gen = vae.decode(z)
    mu, _ = vae.encode(images[:2])
print("vae_loss", " ".join(f"{v:.10f}" for v in vae_stats))
print("vae_gen", tuple(gen.shape), f"{gen.mean().item():.10f}", f"{mu.norm().item():.10f}",
      f"{gen.min().item():.10f}", f"{gen.max().item():.10f}")


# Conditional WGAN-GP critic in float32: label embedding, InstanceNorm2d, gradient penalty
# through torch.autograd.grad(create_graph=True), RMSprop, weight clamp_ and clip_grad_norm_.
class Critic(nn.Module):
    def __init__(self, n_classes=3):
        super().__init__()
        self.embed = nn.Embedding(n_classes, 16 * 16)
        self.net = nn.Sequential(nn.Conv2d(2, 8, 3, 2, 1), nn.InstanceNorm2d(8, affine=True),
                                 nn.LeakyReLU(0.2), nn.Conv2d(8, 8, 3, 2, 1),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))

    def forward(self, x, y):
        cond = self.embed(y).view(-1, 1, 16, 16)
        return self.net(torch.cat([x, cond], dim=1))


critic = Critic().float()
with torch.no_grad():
    for p in critic.parameters():
        p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.2))
optC = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
xr = torch.from_numpy(rng.standard_normal((6, 1, 16, 16)).astype(np.float32))
xf = torch.from_numpy(rng.standard_normal((6, 1, 16, 16)).astype(np.float32) * 0.5)
ys = torch.tensor([0, 1, 2, 0, 1, 2])
wgan = []
for step in range(3):
    alpha = torch.from_numpy(rng.random((6, 1, 1, 1)).astype(np.float32))
    interp = (alpha * xr + (1 - alpha) * xf).requires_grad_(True)
    score = critic(interp, ys)
    grad, = torch.autograd.grad(outputs=score, inputs=interp,
                                grad_outputs=torch.ones_like(score),
                                create_graph=True, retain_graph=True)
    gp = ((grad.view(grad.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(xf, ys).mean() - critic(xr, ys).mean() + 10.0 * gp
    optC.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(critic.parameters(), max_norm=1.0)
    optC.step()
    with torch.no_grad():
        for p in critic.net[-1].parameters():
            p.clamp_(-0.05, 0.05)
    wgan += [loss.item(), gp.item(), float(total)]
print("wgan", " ".join(f"{v:.6f}" for v in wgan),
      # ember: print(torch.float32) shows "ember.float32" under the alias (torch: "torch.float32")
      str(loss.dtype).split(".")[-1],
      f"{critic.embed.weight.grad.abs().sum().item():.6f}")

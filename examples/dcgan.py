"""The PyTorch DCGAN example (pytorch/examples dcgan/main.py): a transposed-convolution
generator and a convolution discriminator with batch norm, trained adversarially with
BCELoss and Adam(beta1=0.5). The program is PyTorch's; only the import block differs, the
networks take --imageSize 16, 32 or 64 (64 is PyTorch's network, layer for layer), and the
data are synthetic (--dataset synthetic: soft blobs; fake: uniform noise, as torchvision's
FakeData) since torchvision and the image sets are not shipped.

Run: python examples/dcgan.py --niter 2 --imageSize 32
     EXAMPLE_BACKEND=torch python examples/dcgan.py --niter 2 --imageSize 32
"""
import argparse
import os
import random

import numpy as np

if os.environ.get("EXAMPLE_BACKEND") == "torch":
    import torch
else:
    import ember as torch
nn, optim = torch.nn, torch.optim
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset


def synthetic_images(n, nc, size, kind, seed=0):
    """``n`` images (nc, size, size) in [-1, 1]: Gaussian blobs at random places with random
    widths and colours ('synthetic'), or uniform noise ('fake')."""
    rng = np.random.default_rng(seed)
    if kind == 'fake':
        return rng.uniform(-1, 1, (n, nc, size, size)).astype(np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    cy, cx = rng.uniform(0.25, 0.75, (2, n, 1, 1))
    width = rng.uniform(0.08, 0.2, (n, 1, 1))
    blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * width ** 2))
    colour = rng.uniform(0.3, 1.0, (n, nc, 1, 1))
    return (2 * blob[:, None] * colour - 1).astype(np.float32)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu, nz, ngf, nc, image_size=64):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        mult = image_size // 8  # 8 for 64x64 images, as PyTorch's network
        layers = [
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * mult, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * mult),
            nn.ReLU(True),
            # state size. (ngf*mult) x 4 x 4
        ]
        while mult > 1:
            layers += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ngf * mult // 2),
                       nn.ReLU(True)]
            mult //= 2
        layers += [
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x image_size x image_size
        ]
        self.main = nn.Sequential(*layers)

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output


class Discriminator(nn.Module):
    def __init__(self, ngpu, ndf, nc, image_size=64):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        layers = [
            # input is (nc) x image_size x image_size
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
        ]
        mult = 1
        while mult < image_size // 8:
            layers += [nn.Conv2d(ndf * mult, ndf * mult * 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ndf * mult * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            mult *= 2
        layers += [
            # state size. (ndf*mult) x 4 x 4
            nn.Conv2d(ndf * mult, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        ]
        self.main = nn.Sequential(*layers)

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)

        return output.view(-1, 1).squeeze(1)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset', default='synthetic', help='synthetic | fake')
    parser.add_argument('--numImages', type=int, default=1024,
                        help='number of images in the data set')
    parser.add_argument('--workers', type=int, help='number of data loading workers',
                        default=0)
    parser.add_argument('--batchSize', type=int, default=64, help='input batch size')
    parser.add_argument('--imageSize', type=int, default=64, choices=(16, 32, 64),
                        help='the height / width of the input image to network')
    parser.add_argument('--nz', type=int, default=100, help='size of the latent z vector')
    parser.add_argument('--ngf', type=int, default=64)
    parser.add_argument('--ndf', type=int, default=64)
    parser.add_argument('--niter', type=int, default=25, help='number of epochs to train for')
    parser.add_argument('--lr', type=float, default=0.0002,
                        help='learning rate, default=0.0002')
    parser.add_argument('--beta1', type=float, default=0.5, help='beta1 for adam. default=0.5')
    parser.add_argument('--dry-run', action='store_true', help='check a single training cycle '
                                                               'works')
    parser.add_argument('--ngpu', type=int, default=1, help='number of GPUs to use')
    parser.add_argument('--netG', default='', help="path to netG (to continue training)")
    parser.add_argument('--netD', default='', help="path to netD (to continue training)")
    parser.add_argument('--outf', default='.', help='folder to output model checkpoints')
    parser.add_argument('--manualSeed', type=int, help='manual seed')
    opt = parser.parse_args(argv)
    print(opt)

    os.makedirs(opt.outf, exist_ok=True)

    if opt.manualSeed is None:
        opt.manualSeed = random.randint(1, 10000)
    print("Random Seed: ", opt.manualSeed)
    random.seed(opt.manualSeed)
    torch.manual_seed(opt.manualSeed)

    nc = 3
    dataset = TensorDataset(torch.from_numpy(
        synthetic_images(opt.numImages, nc, opt.imageSize, opt.dataset, opt.manualSeed)))
    dataloader = DataLoader(dataset, batch_size=opt.batchSize, shuffle=True,
                            num_workers=int(opt.workers))
    device = torch.device("cpu")
    ngpu = int(opt.ngpu)
    nz = int(opt.nz)
    ngf = int(opt.ngf)
    ndf = int(opt.ndf)

    netG = Generator(ngpu, nz, ngf, nc, opt.imageSize).to(device)
    netG.apply(weights_init)
    if opt.netG != '':
        netG.load_state_dict(torch.load(opt.netG))
    print(netG)

    netD = Discriminator(ngpu, ndf, nc, opt.imageSize).to(device)
    netD.apply(weights_init)
    if opt.netD != '':
        netD.load_state_dict(torch.load(opt.netD))
    print(netD)

    criterion = nn.BCELoss()

    fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
    real_label = 1
    fake_label = 0

    # setup optimizer
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    for epoch in range(opt.niter):
        for i, data in enumerate(dataloader, 0):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label,
                               dtype=real_cpu.dtype, device=device)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            # train with fake
            noise = torch.randn(batch_size, nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()

            print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                  % (epoch, opt.niter, i, len(dataloader),
                     errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            if i % 100 == 0:
                fake = netG(fixed_noise)
                np.save('%s/fake_samples_epoch_%03d.npy' % (opt.outf, epoch),
                        fake.detach().numpy())

            if opt.dry_run:
                break
        # do checkpointing
        torch.save(netG.state_dict(), '%s/netG_epoch_%d.pth' % (opt.outf, epoch))
        torch.save(netD.state_dict(), '%s/netD_epoch_%d.pth' % (opt.outf, epoch))


if __name__ == '__main__':
    main()

import sys, torch
sys.path.insert(0, "/work/main/bench")
import export_models as em
g = lambda s: torch.Generator().manual_seed(s)

def lstm():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(1000, 128)
            self.lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(512, 10)
        def forward(self, ids):
            h, _ = self.lstm(self.emb(ids))
            return self.head(h[:, -1])
    return M(), (torch.randint(0, 1000, (2, 50), generator=g(0)),), ["ids"]

def gru():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(64, 128, batch_first=True)
            self.head = torch.nn.Linear(128, 5)
        def forward(self, x):
            h, _ = self.gru(x)
            return self.head(h)
    return M(), (torch.randn(4, 30, 64, generator=g(0)),), ["x"]

def unet_like():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            c = torch.nn.Conv2d
            self.d1 = torch.nn.Sequential(c(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
            self.d2 = torch.nn.Sequential(c(32, 64, 3, stride=2, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU())
            self.up = torch.nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.out = c(64, 2, 1)
        def forward(self, x):
            a = self.d1(x); b = self.d2(a)
            u = self.up(b)
            u2 = torch.nn.functional.interpolate(b, scale_factor=2, mode="bilinear", align_corners=False)[:, :32]
            return self.out(torch.cat([a, u + u2], 1))
    return M(), (torch.randn(1, 3, 128, 128, generator=g(0)),), ["x"]

em.MODELS["lstm_ts"] = (lstm, "torchscript")
em.MODELS["lstm_dyn"] = (lstm, "dynamo")
em.MODELS["gru_dyn"] = (gru, "dynamo")
em.MODELS["unet_dyn"] = (unet_like, "dynamo")
em.MODELS["unet_ts"] = (unet_like, "torchscript")
if __name__ == "__main__":
    em.main()

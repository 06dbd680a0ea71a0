#!/usr/bin/env python3
"""Renders captured terminal text (stdin) to a PNG for the README."""
import sys
import textwrap
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
lines = []
for raw in sys.stdin.read().rstrip("\n").split("\n"):
    lines.extend(textwrap.wrap(raw, 92, drop_whitespace=False) or [""])
font = ImageFont.truetype(FONT, 16)
w = max(len(l) for l in lines) * 10 + 40
h = len(lines) * 22 + 60
img = Image.new("RGB", (max(w, 640), h), (30, 32, 40))
d = ImageDraw.Draw(img)
for i, c in enumerate([(255, 95, 86), (255, 189, 46), (39, 201, 63)]):
    d.ellipse((14 + i * 22, 12, 28 + i * 22, 26), fill=c)
for i, line in enumerate(lines):
    colour = (130, 200, 255) if line.startswith("you>") else (230, 230, 230)
    d.text((20, 44 + i * 22), line, font=font, fill=colour)
img.save(sys.argv[1])

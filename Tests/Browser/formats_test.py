"""WebP and AVIF answers as a browser shows them: headless Chromium (Debian's) driven by Playwright.

Starts `tiler serve` twice on a folder holding a generated photograph-like JPEG: with its defaults, and
with the slower encoder settings (`--webp-method 6 --webp-sharp-yuv --avif-speed 4 --avif-chroma 444`).
For each, a page showing the same region as `.webp`, `.avif` and `.png` (<img> elements, no script of
ours): every image loads at its size, and each lossy one, screenshotted as the browser drew it, is within
the stated PSNR of the PNG answer decoded by Pillow. The AVIFs' AV1 profile is read from their `av1C` box
(AV1 Codec ISO Media File Format Binding, 2.3: seq_profile, the top 3 bits of its second byte): Main (0)
by default, High (1) in 4:4:4, which AVIF's baseline profile leaves out and Chromium's decoder shows.
Screenshots are kept in the folder given as the first argument. Exits non-zero on any failure.
"""
import io, os, sys, tempfile
import numpy as np
from PIL import Image
from playwright.sync_api import sync_playwright
from pictures import make_image, psnr
from viewer_test import check, failures, serve, urlread

OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
REGION = "/iiif/3/photo/700,400,640,480/max/0/default"

def av1_profile(data):
    """seq_profile of the first `av1C` box: the top 3 bits of the byte after its marker and version."""
    at = data.find(b"av1C")
    return data[at + 5] >> 5 if at >= 0 else None

def shown(browser, port, label):
    page = browser.new_page(viewport={"width": 700, "height": 1600}, device_scale_factor=1)
    base = f"http://127.0.0.1:{port}{REGION}"
    page.set_content("".join(f'<img id="{f}" src="{base}.{f}" style="display:block">' for f in ["png", "webp", "avif"]),
                     wait_until="load")
    reference = np.asarray(Image.open(io.BytesIO(urlread(port, f"{REGION}.png"))).convert("RGB"))
    for f in ["webp", "avif"]:
        size = page.evaluate(f"[document.getElementById('{f}').naturalWidth, document.getElementById('{f}').naturalHeight]")
        check(size == [640, 480], f"{label}: the .{f} answer loads in Chromium at 640x480 ({size})")
        shot = os.path.join(OUT, f"formats-{label}.{f}.png")
        page.locator(f"#{f}").screenshot(path=shot)
        value = psnr(np.asarray(Image.open(shot).convert("RGB")), reference)
        check(value >= 35, f"{label}: the .{f} answer as Chromium draws it, against the PNG answer: {value:.1f} dB (at least 35)")
    page.close()

def main():
    folder = tempfile.mkdtemp()
    make_image(os.path.join(folder, "photo.jpg"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for label, options, profile in [
            ("defaults", [], 0),
            ("slower", ["--webp-method", "6", "--webp-sharp-yuv", "--avif-speed", "4", "--avif-chroma", "444"], 1),
        ]:
            server, port = serve(folder, "--cache", os.path.join(folder, f".cache-{label}"), *options)
            try:
                # The first answers wait for the build; once the PNG is whole, the others render at once.
                urlread(port, f"{REGION}.png")
                avif = urlread(port, f"{REGION}.avif")
                check(av1_profile(avif) == profile, f"{label}: the AVIF's AV1 profile is {profile} ({av1_profile(avif)})")
                shown(browser, port, label)
            finally:
                server.terminate()
                server.wait(10)
        browser.close()
    print(f"screenshots in {OUT}")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

main()

#!/usr/bin/env bash
# Builds and runs the fuzz targets for SECONDS each (default 60); exit 0 only when none crashed.
# Usage: scripts/fuzz.sh [SECONDS]   Results go to .build-fuzz/ and the table in RELIABILITY.md.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
out=.build-fuzz
mkdir -p "$out"
if ! dpkg -s libjpeg62-turbo-dev libjpeg-turbo-progs libtiff-dev libtiff-tools netpbm libopenjp2-7-dev libopenjp2-tools libwebp-dev libavif-dev >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjpeg62-turbo-dev libjpeg-turbo-progs libpng-dev \
    libtiff-dev libtiff-tools netpbm libopenjp2-7-dev libopenjp2-tools libwebp-dev libavif-dev pkg-config >/dev/null
fi
clang=$(command -v clang || echo /opt/swift/usr/bin/clang)
# The shim's WebP TIFF tiles are encoded by CWebEncoders (its AVIF half comes along, unused).
shim=(Sources/CJpegShim/*.c Sources/CTiffIO/tiff_io.c Sources/CWebEncoders/*.c)
for target in decoder_fuzz tiff_fuzz; do
  "$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
    -I Sources/CJpegShim/include -I Sources/CJpegShim -I Sources/CTiffIO/include -I Sources/CWebEncoders/include \
    Fuzz/$target.c "${shim[@]}" $(pkg-config --cflags --libs libpng libtiff-4 libwebpmux) -lavif -ljpeg -lpthread -o "$out/$target" 2>"$out/clang.log" \
    || { cat "$out/clang.log"; exit 1; }
done
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -I Sources/CPngDecoder/include \
  -I Sources/CSpool/include Fuzz/png_fuzz.c Sources/CPngDecoder/*.c Sources/CSpool/spool.c $(pkg-config --cflags --libs libpng) -o "$out/png_fuzz" 2>"$out/clang.log" \
  || { cat "$out/clang.log"; exit 1; }
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -I Sources/CTiffDecoder/include -I Sources/CTiffIO/include -I Sources/CSpool/include Fuzz/tiff_master_fuzz.c \
  Sources/CTiffDecoder/*.c Sources/CTiffIO/tiff_io.c Sources/CSpool/spool.c $(pkg-config --cflags --libs libtiff-4) -o "$out/tiff_master_fuzz" 2>"$out/clang.log" \
  || { cat "$out/clang.log"; exit 1; }
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -I Sources/CJp2Decoder/include -I Sources/CJp2Decoder -I Sources/CSpool/include Fuzz/jp2_master_fuzz.c Sources/CJp2Decoder/*.c \
  $(pkg-config --cflags --libs libopenjp2) -o "$out/jp2_master_fuzz" 2>"$out/clang.log" \
  || { cat "$out/clang.log"; exit 1; }
swiftc -sanitize=fuzzer,address -parse-as-library -package-name TiledImageKit -O Fuzz/metadata_fuzz.swift \
  Sources/TileCore/{Decoding/{HeaderSegments,EXIFReader,ImageInfo,JPEGHeader},System/{InputFile,SystemCall,BlockingCallCheck,OwnedDescriptor},Geometry/ImageOrientation,TileError}.swift \
  -o "$out/metadata_fuzz" 2>"$out/swiftc.log" || { cat "$out/swiftc.log"; exit 1; }
swiftc -sanitize=fuzzer,address -parse-as-library -package-name TiledImageKit -O Fuzz/request_fuzz.swift \
  Sources/TileCore/Requests/ImageRequest*.swift Sources/TileCore/Geometry/{PyramidLayout,TileGeometry,ImageOrientation}.swift \
  Sources/TileCore/TileError.swift -o "$out/request_fuzz" 2>"$out/swiftc.log" || { cat "$out/swiftc.log"; exit 1; }

# Seeds: small JPEGs made here with cjpeg (baseline, progressive, restarts, grey), plus the corpus.
seeds="$out/seeds"
mkdir -p "$seeds"
python3 - "$seeds" <<'PY'
import sys
w, h = 37, 29
rgb = bytes(((x * 7 + y * 3) & 255) for y in range(h) for x in range(w) for _ in range(3))
open(sys.argv[1] + "/seed.ppm", "wb").write(b"P6\n%d %d\n255\n" % (w, h) + rgb)
PY
cjpeg -quality 50 "$seeds/seed.ppm" >"$seeds/baseline.jpg"
cjpeg -quality 50 -progressive "$seeds/seed.ppm" >"$seeds/progressive.jpg"
cjpeg -quality 50 -restart 1 -sample 1x1 "$seeds/seed.ppm" >"$seeds/restart444.jpg"
cjpeg -quality 50 -grayscale "$seeds/seed.ppm" >"$seeds/grey.jpg"
cjpeg -quality 50 -arithmetic "$seeds/seed.ppm" >"$seeds/arithmetic.jpg"
rm "$seeds/seed.ppm"
# Hostile seeds: bytes after the image, and a scan flood (empty AC refinement scans, as in issue 15).
python3 - "$seeds" <<'PY'
import sys
d = sys.argv[1]
base = open(d + "/baseline.jpg", "rb").read()
open(d + "/trailing.jpg", "wb").write(base + bytes(65536))
p = open(d + "/progressive.jpg", "rb").read()
i = p.rfind(b"\xff\xda")
open(d + "/scanflood.jpg", "wb").write(p[:i] + bytes.fromhex("ffda0008010100013f10") * 300 + b"\xff\xd9")
PY
if [ -d ../shared/fixtures/jpeg ]; then
  find ../shared/fixtures/jpeg -name '*.jp*g' -size -200k -exec cp {} "$seeds/" \;
fi
# TIFF seeds (tiff_fuzz): tiled pyramids of the baseline seed as libvips and tiler write them (JPEG,
# deflate with a predictor, LZW, none, WebP; SubIFDs), and a stripped TIFF from libtiff's ppm2tiff.
tiff_seeds="$out/tiff-seeds"
mkdir -p "$tiff_seeds"
djpeg -pnm "$seeds/baseline.jpg" >"$out/seed.ppm"
command -v ppm2tiff >/dev/null && ppm2tiff "$out/seed.ppm" "$tiff_seeds/stripped.tif"
if command -v vips >/dev/null; then
  for c in jpeg deflate lzw none webp; do
    vips tiffsave "$out/seed.ppm" "$tiff_seeds/vips-$c.tif" --tile --pyramid --compression $c --tile-width 16 --tile-height 16
  done
  vips tiffsave "$out/seed.ppm" "$tiff_seeds/vips-subifd.tif" --tile --pyramid --subifd --compression jpeg --tile-width 16 --tile-height 16
fi
# PNG seeds (png_fuzz): the seed image as netpbm and libvips write it (RGB, gray, palette, 16-bit, alpha,
# tRNS, interlaced), and the corpus's PNG named .jpg.
png_seeds="$out/png-seeds"
mkdir -p "$png_seeds"
if command -v pnmtopng >/dev/null; then
  pnmtopng "$out/seed.ppm" >"$png_seeds/rgb.png"
  ppmtopgm "$out/seed.ppm" | pnmtopng >"$png_seeds/gray.png"
  pnmquant 8 "$out/seed.ppm" 2>/dev/null | pnmtopng >"$png_seeds/palette.png"
  pnmdepth 65535 "$out/seed.ppm" | pnmtopng -force >"$png_seeds/rgb16.png" 2>/dev/null
  ppmtopgm "$out/seed.ppm" >"$out/alpha.pgm" && pnmtopng -alpha="$out/alpha.pgm" "$out/seed.ppm" >"$png_seeds/rgba.png"
  pnmtopng -transparent black "$out/seed.ppm" >"$png_seeds/trns.png"
  pnmtopng -interlace "$out/seed.ppm" >"$png_seeds/interlaced.png"
fi
command -v vips >/dev/null && vips pngsave "$out/seed.ppm" "$png_seeds/vips.png"
[ -f ../shared/fixtures/jpeg/jpg-size-6x6.jpg ] && cp ../shared/fixtures/jpeg/jpg-size-6x6.jpg "$png_seeds/named-jpg.png"
# TIFF master seeds (tiff_master_fuzz): the seed image stripped and tiled as netpbm, libtiff and libvips
# write it (gray, bilevel, palette, 16-bit, CMYK, separate planes, LZW with a predictor, big-endian
# BigTIFF, JPEG YCbCr, alpha), plus the pyramid seeds.
master_seeds="$out/tiff-master-seeds"
mkdir -p "$master_seeds"
cp "$tiff_seeds"/*.tif "$master_seeds/" 2>/dev/null
if command -v pnmtotiff >/dev/null; then
  pnmtotiff -truecolor "$out/seed.ppm" >"$master_seeds/rgb.tif" 2>/dev/null
  ppmtopgm "$out/seed.ppm" | pnmtotiff -miniswhite >"$master_seeds/gray.tif" 2>/dev/null
  ppmtopgm "$out/seed.ppm" | pgmtopbm 2>/dev/null | pnmtotiff -g4 >"$master_seeds/bilevel.tif" 2>/dev/null
  pnmquant 8 "$out/seed.ppm" 2>/dev/null | pnmtotiff -indexbits=4 >"$master_seeds/palette.tif" 2>/dev/null
  pnmdepth 65535 "$out/seed.ppm" | pnmtotiff -truecolor -lzw -predictor=2 >"$master_seeds/rgb16.tif" 2>/dev/null
  pnmtotiffcmyk "$out/seed.ppm" >"$master_seeds/cmyk.tif" 2>/dev/null
  tiffcp -p separate -t -w 16 -l 16 -c packbits "$master_seeds/rgb.tif" "$master_seeds/planes.tif"
  tiffcp -B -8 -c zip:2 "$master_seeds/rgb.tif" "$master_seeds/bigtiff.tif"
  tiffcp -c jpeg -r 8 "$master_seeds/rgb.tif" "$master_seeds/ycbcr.tif"
fi
command -v vips >/dev/null && [ -f "$png_seeds/rgba.png" ] && vips tiffsave "$png_seeds/rgba.png" "$master_seeds/rgba.tif"
# JPEG 2000 seeds (jp2_master_fuzz): the seed image as opj_compress and libvips write it (lossless JP2,
# lossy J2K, tiles, precincts in RPCL order, irreversible, gray, 16-bit; a tiled lossy JP2). Five
# resolutions: OpenJPEG's default six need a side of at least 32.
jp2_seeds="$out/jp2-seeds"
mkdir -p "$jp2_seeds"
if command -v opj_compress >/dev/null; then
  opj_compress -i "$out/seed.ppm" -n 5 -o "$jp2_seeds/lossless.jp2" >/dev/null 2>&1
  opj_compress -i "$out/seed.ppm" -n 5 -o "$jp2_seeds/lossy.j2k" -r 20 >/dev/null 2>&1
  opj_compress -i "$out/seed.ppm" -n 5 -o "$jp2_seeds/tiled.jp2" -t 16,16 >/dev/null 2>&1
  opj_compress -i "$out/seed.ppm" -n 5 -o "$jp2_seeds/rpcl.jp2" -c '[16,16]' -p RPCL >/dev/null 2>&1
  opj_compress -i "$out/seed.ppm" -n 5 -o "$jp2_seeds/irreversible.jp2" -I -r 10 >/dev/null 2>&1
  ppmtopgm "$out/seed.ppm" >"$out/seed.pgm" && opj_compress -i "$out/seed.pgm" -n 5 -o "$jp2_seeds/gray.jp2" >/dev/null 2>&1
  pnmdepth 65535 "$out/seed.ppm" >"$out/seed16.ppm" && opj_compress -i "$out/seed16.ppm" -n 5 -o "$jp2_seeds/rgb16.jp2" >/dev/null 2>&1
fi
command -v vips >/dev/null && vips copy "$out/seed.ppm" "$jp2_seeds/vips.jp2[Q=50,tile-width=16,tile-height=16]"
# HTJ2K (Part 15) seeds, whose bands are whole rows of tiles: one tile, and 16 x 16 tiles.
if command -v ojph_compress >/dev/null; then
  ojph_compress -i "$out/seed.ppm" -o "$jp2_seeds/ht.j2c" -num_decomps 3 >/dev/null 2>&1
  ojph_compress -i "$out/seed.ppm" -o "$jp2_seeds/ht-tiled.j2c" -num_decomps 3 -tile_size '{16,16}' >/dev/null 2>&1
fi
# A hostile seed (issue 37): a codestream of empty packets declaring 16384 x 16384 in 4 x 4 code-blocks
# (OpenJPEG allocated 7 GB for its code-blocks before the size check refused it).
python3 - "$jp2_seeds/codeblocks.j2k" <<'PY'
import struct, sys
side, levels = 16384, 5
siz = struct.pack(">HHIIIIIIIIH", 41, 0, side, side, 0, 0, side, side, 0, 0, 1) + bytes([7, 1, 1])
cod = struct.pack(">HBBHBBBBBB", 12, 0, 0, 1, 0, levels, 0, 0, 0, 1)
qcd = struct.pack(">HB", 3 + 1 + 3 * levels, 0x40) + bytes(e << 3 for e in [8] + [9, 9, 10] * levels)
packets = bytes(levels + 1)
sot = struct.pack(">HHIBB", 10, 0, 12 + 2 + len(packets), 0, 1)
data = b"\xff\x4f\xff\x51" + siz + b"\xff\x52" + cod + b"\xff\x5c" + qcd + b"\xff\x90" + sot + b"\xff\x93" + packets + b"\xff\xd9"
open(sys.argv[1], "wb").write(data)
PY
# IIIF request seeds (request_fuzz): six bytes of image size and limits, then a path of the Image API 3.0 or 2.1
# grammar, one of each form the specifications give, or a DeepZoom tile's two segments.
request_seeds="$out/request-seeds"
mkdir -p "$request_seeds"
python3 - "$request_seeds" <<'PY'
import sys
paths = ["full/max/0/default.jpg", "0,0,256,256/256,/0/default.jpg", "pct:10,10,50,50/!200,200/90/gray.png",
         "square/^max/!180/bitonal.webp", "full/pct:50/0/color.avif", "10,20,30,40/,100/270/default.jpg",
         "full/full/0/native.jpg", "full/^pct:150/22.5/default.png", "full/!1000,^/0/default.jpg", "full/^!90,100/0/default.jpg",
         "0,0,99999999999,1/max/0/default.jpg", "full/,0/0/default.jpg", "0/0_0.jpg", "10/3_2.jpg", "11/0_0.png",
         "12/4_3.jpg"]
for i, path in enumerate(paths):
    open(f"{sys.argv[1]}/{i}", "wb").write(bytes([0x46, 0x50, 0x3A, 0x98, i % 4, i % 2]) + path.encode())
PY
tiler=$(ls .build/*/debug/tiler .build/debug/tiler 2>/dev/null | head -1 || true)
if [ -n "$tiler" ]; then
  "$tiler" build "$seeds/baseline.jpg" --tile-size 16 --out "$out/seed.tiles" >/dev/null && cp "$out/seed.tiles/pyramid.tif" "$tiff_seeds/tiler.tif"
  rm -rf "$out/seed.tiles"
fi

status=0
summary=()
for target in decoder_fuzz tiff_fuzz tiff_master_fuzz jp2_master_fuzz png_fuzz metadata_fuzz request_fuzz; do
  corpus="$out/corpus-$target"
  mkdir -p "$corpus" "$out/crashes"
  log="$out/$target.log"
  seed_folder="$seeds"
  [ "$target" = tiff_fuzz ] && seed_folder="$tiff_seeds"
  [ "$target" = png_fuzz ] && seed_folder="$png_seeds"
  [ "$target" = tiff_master_fuzz ] && seed_folder="$master_seeds"
  [ "$target" = jp2_master_fuzz ] && seed_folder="$jp2_seeds"
  [ "$target" = request_fuzz ] && seed_folder="$request_seeds"
  ASAN_OPTIONS="quarantine_size_mb=64:allocator_release_to_os_interval_ms=1000" \
  "$out/$target" -max_total_time="$seconds" -rss_limit_mb=512 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/$target-" "$corpus" "$seed_folder" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  crashes=$(ls "$out/crashes" | grep -c "^$target-" || true)
  echo "$target: exit $rc, $runs executions, coverage $cov edges, $crashes crash files"
  summary+=("| \`$target\` | ${seconds} s | $runs | $cov | $crashes | $([ $rc -eq 0 ] && echo pass || echo FAIL) |")
  [ $rc -eq 0 ] || { status=1; tail -30 "$log"; }
done

# Keep RELIABILITY.md's fuzz table current.
if [ -f RELIABILITY.md ]; then
  python3 - "${summary[@]}" <<'PY'
import sys, re
rows = "\n".join(sys.argv[1:])
text = open("RELIABILITY.md").read()
table = "| target | time | executions | coverage (edges) | crashes | result |\n|---|---|---|---|---|---|\n" + rows + "\n"
text = re.sub(r"<!-- fuzz:begin -->.*<!-- fuzz:end -->", "<!-- fuzz:begin -->\n" + table + "<!-- fuzz:end -->", text, flags=re.S)
open("RELIABILITY.md", "w").write(text)
PY
fi
exit $status

// tsc emits no .d.ts for a .d.ts input, so the generated src/schema.d.ts is
// copied beside dist/src/index.d.ts, which imports its types.
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("dist/src", { recursive: true });
copyFileSync("src/schema.d.ts", "dist/src/schema.d.ts");

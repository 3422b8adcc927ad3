import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

// `tsx scripts/largest-units.ts [count] [dir]`: lists the largest functions and classes of src/ by lines (first to
// last line of the declaration, comments inside included), so a split of a big unit can be measured before and after.
// A function nested in another counts on its own as well as inside its parent: the list shows where size sits.

/** One measured unit: a class, or a named function, method or function-valued variable. */
export interface Unit {
  kind: 'class' | 'function' | 'method';
  name: string;
  file: string;
  line: number;
  lines: number;
}

/** Every class and named function of one source file, with its line count. */
export function unitsOf(file: string, text: string): Unit[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const units: Unit[] = [];
  const add = (kind: Unit['kind'], name: string, node: ts.Node): void => {
    const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
    const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
    units.push({ kind, name, file, line: first + 1, lines: last - first + 1 });
  };
  const visit = (node: ts.Node, owner: string | null): void => {
    let inner = owner;
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      const name = node.name?.text ?? '(anonymous class)';
      add('class', name, node);
      inner = name;
    } else if (ts.isFunctionDeclaration(node) && node.body) {
      add('function', node.name?.text ?? '(default)', node);
    } else if ((ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)) && node.body) {
      const name = ts.isConstructorDeclaration(node) ? 'constructor' : node.name.getText(source);
      add('method', owner === null ? name : `${owner}.${name}`, node);
    } else if (ts.isVariableDeclaration(node) && node.initializer && ts.isIdentifier(node.name)) {
      const init = node.initializer;
      if (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) add('function', node.name.text, node);
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(source, null);
  return units;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

/** The `count` largest units under `dir`, largest first. */
export function largestUnits(dir: string, count: number): Unit[] {
  const units = sourceFiles(dir).flatMap((file) => unitsOf(relative(process.cwd(), file), readFileSync(file, 'utf8')));
  return units.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file)).slice(0, count);
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  const count = Number(process.argv[2] ?? 10);
  const dir = process.argv[3] ?? 'src';
  console.log('| # | Unit | Kind | Lines | Where |');
  console.log('| --- | --- | --- | --- | --- |');
  largestUnits(dir, count).forEach((u, i) => {
    console.log(`| ${i + 1} | \`${u.name}\` | ${u.kind} | ${u.lines} | ${u.file}:${u.line} |`);
  });
}

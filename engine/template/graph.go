package template

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// graph checks needs: unknown stages, self-needs and cycles.
func (p *parser) graph(stages []Stage, needs [][]needRef) {
	index := map[string]int{}
	var names []string
	for i, st := range stages {
		if st.Name == "" {
			continue
		}
		if _, dup := index[st.Name]; !dup {
			index[st.Name] = i
			names = append(names, st.Name)
		}
	}
	edges := make([][]int, len(stages)) // i -> stages i needs
	for i, st := range stages {
		if st.Name == "" || index[st.Name] != i {
			continue
		}
		for _, r := range needs[i] {
			j, ok := index[r.name]
			switch {
			case r.name == st.Name:
				p.addf(r.line, "stage %q needs itself; remove %q from its needs", st.Name, r.name)
			case !ok:
				p.addf(r.line, "stage %q needs unknown stage %q (stages are: %s)", st.Name, r.name, listNames(names))
			default:
				edges[i] = append(edges[i], j)
			}
		}
	}
	for _, scc := range components(edges) {
		if len(scc) < 2 {
			continue
		}
		path := shortestCycle(scc, edges)
		start, prev := path[0], path[len(path)-2]
		line := stages[start].Line
		for _, r := range needs[start] {
			if r.name == stages[prev].Name {
				line = r.line
			}
		}
		var names []string
		for k, i := range path {
			if len(path) > 12 && k == 10 {
				names = append(names, fmt.Sprintf("… (%d more)", len(path)-12))
			}
			if len(path) <= 12 || k < 10 || k >= len(path)-2 {
				names = append(names, stages[i].Name)
			}
		}
		p.addf(line, "stages form a cycle: %s (each needs the one before it); remove one of these needs", strings.Join(names, " → "))
	}
}

// components returns the strongly connected components of the graph
// (Tarjan), each sorted, ordered by their smallest member.
func components(edges [][]int) [][]int {
	n := len(edges)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range edges[v] {
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// shortestCycle returns a shortest cycle through the first stage of scc in
// run order (each stage needs the one before it), as a path that starts
// and ends with that stage.
func shortestCycle(scc []int, needEdges [][]int) []int {
	in := map[int]bool{}
	for _, v := range scc {
		in[v] = true
	}
	// Run-order successors: u -> v when v needs u, ascending v.
	succ := map[int][]int{}
	for _, v := range scc {
		for _, u := range needEdges[v] {
			if in[u] {
				succ[u] = append(succ[u], v)
			}
		}
	}
	start := scc[0]
	parent := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range succ[u] {
			if v == start {
				path := []int{start}
				for x := u; x != start; x = parent[x] {
					path = append(path, x)
				}
				slices.Reverse(path[1:])
				return append(path, start)
			}
			if _, seen := parent[v]; !seen {
				parent[v] = u
				queue = append(queue, v)
			}
		}
	}
	return append(slices.Clone(scc), start) // unreachable for a real component
}

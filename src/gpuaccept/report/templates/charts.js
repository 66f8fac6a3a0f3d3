// each chart's figure is JSON beside its div: hand it to plotly.js, which is inlined above
document.querySelectorAll("script.{{ chart_class }}").forEach(function (source) {
  var figure = JSON.parse(source.textContent);
  Plotly.newPlot(source.getAttribute("data-for"), figure.data, figure.layout, figure.config);
});
